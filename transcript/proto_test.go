package transcript

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// TestDecodesTheProtoContract: a TranscriptEvent marshalled by protojson
// with the proto's names (as a client generated from the .proto sends it:
// 64-bit integers as strings) decodes into the same values, and the Go
// Event has exactly the proto's fields.
func TestDecodesTheProtoContract(t *testing.T) {
	msg := &yesguardv1.TranscriptEvent{
		CallId: "c1", Seq: 7, Speaker: "caller", Type: "transcript", Text: "Yes, go ahead.", Final: true,
		StartMs: 1200, EndMs: 1800, Lang: "en-US", ResponseId: "r1", Interrupted: true, Confidence: 0.93,
		Source: "stt", Epoch: 1796100000000,
	}
	// Every field is set, so a field added to the proto without a value
	// here fails.
	fields := msg.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if !msg.ProtoReflect().Has(fields.Get(i)) {
			t.Fatalf("field %s is not set in the test message", fields.Get(i).Name())
		}
	}
	data, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"seq":"7"`) {
		t.Fatalf("protojson no longer quotes 64-bit integers: %s", data)
	}
	ev, err := Decode(testPrefix, testPrefix+".c1", data, Limits{})
	if err != nil {
		t.Fatalf("Decode(%s): %v", data, err)
	}
	start, end, conf := int64(1200), int64(1800), 0.93
	want := Event{CallID: "c1", Seq: 7, Speaker: Caller, Type: TypeTranscript, Text: "Yes, go ahead.", Final: true,
		StartMS: &start, EndMS: &end, Lang: "en-US", ResponseID: "r1", Interrupted: true, Confidence: &conf,
		Source: "stt", Epoch: 1796100000000}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("decoded %+v\nwant    %+v", ev, want)
	}

	// The Go Event's JSON names are the proto's names, no more, no fewer.
	goNames := map[string]bool{}
	et := reflect.TypeFor[Event]()
	for i := range et.NumField() {
		name, _, _ := strings.Cut(et.Field(i).Tag.Get("json"), ",")
		goNames[name] = true
	}
	for i := range fields.Len() {
		name := string(fields.Get(i).Name())
		if !goNames[name] {
			t.Errorf("proto field %s has no Event field", name)
		}
		delete(goNames, name)
	}
	for name := range goNames {
		t.Errorf("Event field %s is not in the proto's TranscriptEvent", name)
	}
	for _, k := range knownKeys {
		if fields.ByName(protoreflect.Name(k)) == nil {
			t.Errorf("fast path key %s is not in the proto", k)
		}
	}
	if len(knownKeys) != fields.Len() {
		t.Errorf("fast path knows %d keys, the proto has %d fields", len(knownKeys), fields.Len())
	}
	// The same event written with plain JSON numbers decodes alike.
	var plain map[string]any
	if err := json.Unmarshal(data, &plain); err != nil {
		t.Fatal(err)
	}
	plain["seq"], plain["epoch"], plain["start_ms"], plain["end_ms"] = 7, 1796100000000, 1200, 1800
	b, _ := json.Marshal(plain)
	if ev2, err := Decode(testPrefix, testPrefix+".c1", b, Limits{}); err != nil || !reflect.DeepEqual(ev2, want) {
		t.Fatalf("plain numbers: %+v, %v", ev2, err)
	}
}
