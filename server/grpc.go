package server

import (
	"context"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// panicMessage tells the pipeline what to do with a call that failed
// inside: nothing was judged, so the action must not run.
const panicMessage = "yesguard failed inside while judging this call; do not run the tool"

// recoverUnary turns a handler's panic into codes.Internal for that call.
func (s *Server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, s.recovered(info.FullMethod, r)
		}
	}()
	return handler(ctx, req)
}

// recoverStream does the same for streams (health Watch, reflection).
func (s *Server) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = s.recovered(info.FullMethod, r)
		}
	}()
	return handler(srv, ss)
}

func (s *Server) recovered(method string, r any) error {
	s.log.Error("panic in gRPC handler", zap.String("method", method), zap.Any("panic", r), zap.Stack("stack"))
	if strings.HasPrefix(method, "/"+yesguardv1.Guard_ServiceDesc.ServiceName+"/") {
		s.service.CountError(codes.Internal)
	}
	return status.Error(codes.Internal, panicMessage)
}
