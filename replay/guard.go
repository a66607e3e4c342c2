package replay

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
	"github.com/yesguard/yesguard/transcript"
)

// FromGuard builds one call from what the guard's ListDecisions answered
// an auditor: the records of every page, and the events of the first
// (include_events), each with the time the transcript stream received it.
// Each event is decoded from its JSON as the guard decodes a published
// one; one that does not decode is counted as dropped.
func FromGuard(callID string, records []*yesguardv1.Decision, events []*yesguardv1.ReceivedEvent) (*Call, error) {
	c := &Call{ID: callID, Records: records}
	limits := transcript.Limits{}
	limits.SetDefaults()
	const prefix = "yesguard.transcript" // any: the subject only carries the call id here
	for _, re := range events {
		raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(re.GetEvent())
		if err != nil || re.GetReceivedAt() == nil {
			c.Dropped++
			continue
		}
		ev, err := transcript.Decode(prefix, prefix+"."+callID, raw, limits)
		if err != nil {
			c.Dropped++
			continue
		}
		c.Events = append(c.Events, Event{Event: ev, ReceivedAt: re.GetReceivedAt().AsTime(), Raw: raw})
	}
	if len(c.Events) == 0 && len(c.Records) == 0 {
		return nil, fmt.Errorf("call %q: the guard holds no records and no transcript events for it", callID)
	}
	c.sort()
	return c, nil
}
