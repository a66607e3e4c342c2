package server

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger builds the operational logger: JSON lines (or the console
// format for people, when console is set) on w, stderr when w is nil, at
// level (debug, info, warn or error).
func NewLogger(level string, w zapcore.WriteSyncer, console bool) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("%q is not one of debug, info, warn, error", level)
	}
	if w == nil {
		w = zapcore.Lock(os.Stderr)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.TimeKey = "ts"
	encCfg.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	enc := zapcore.NewJSONEncoder(encCfg)
	if console {
		encCfg = zap.NewDevelopmentEncoderConfig()
		encCfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(encCfg)
	}
	return zap.New(zapcore.NewCore(enc, w, lvl), zap.ErrorOutput(w)).Named("yesguard"), nil
}
