package service

import (
	"sync"

	"github.com/yesguard/yesguard/metrics"
)

// maxUnlistedToolLabels bounds the tool label values of tools the policy
// does not list: the first ones seen are labelled by name, so a guard run
// without a policy still tells its tools apart; the rest are "other", so
// a model inventing tool names cannot grow the label set past it.
const maxUnlistedToolLabels = 32

// toolLabels is the tool label of each tool. Safe for concurrent use.
type toolLabels struct {
	mu       sync.Mutex
	unlisted map[string]struct{} // at most maxUnlistedToolLabels names
}

// of is tool's label: its name when the policy lists it or it is among
// the first unlisted ones seen, else metrics.OtherTool.
func (l *toolLabels) of(tool string, listed bool) string {
	if listed {
		return tool
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.unlisted[tool]; ok {
		return tool
	}
	if len(l.unlisted) >= maxUnlistedToolLabels {
		return metrics.OtherTool
	}
	if l.unlisted == nil {
		l.unlisted = map[string]struct{}{}
	}
	l.unlisted[tool] = struct{}{}
	return tool
}
