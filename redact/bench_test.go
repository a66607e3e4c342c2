package redact

import "testing"

// BenchmarkDecision is what redaction adds to writing one record with
// every rule on: a clone, the field rules, the value scrub and the digit
// mask over the speech of a typical record.
func BenchmarkDecision(b *testing.B) {
	r, err := New(Config{DropFields: []string{"card.number", "phone"}, HashFields: []string{"card.holder"}, Key: testKey, MaskDigits: true})
	if err != nil {
		b.Fatal(err)
	}
	d := decision()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Decision(d); err != nil {
			b.Fatal(err)
		}
	}
}
