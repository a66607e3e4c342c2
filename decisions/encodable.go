package decisions

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// Encodable returns d as every writer can encode it: the log and the
// stream (protojson) refuse a Timestamp outside years 1 to 9999 and a
// string that is not UTF-8, and would lose the whole record. When d holds
// such a field it returns a copy in which each is replaced (a timestamp
// cleared, a string's bad bytes made U+FFFD), with a note of each in the
// copy's evidence detail, and the fields it replaced; otherwise d itself
// and nil. d is never changed.
func Encodable(d *yesguardv1.Decision) (*yesguardv1.Decision, []string) {
	if len(unencodable(d.ProtoReflect(), "", false)) == 0 {
		return d, nil
	}
	c := proto.Clone(d).(*yesguardv1.Decision)
	fixed := unencodable(c.ProtoReflect(), "", true)
	if c.Evidence == nil {
		c.Evidence = &yesguardv1.Evidence{}
	}
	note := "fields no record can hold were replaced: " + strings.Join(fixed, ", ")
	if c.Evidence.Detail != "" {
		note = c.Evidence.Detail + "; " + note
	}
	c.Evidence.Detail = strings.ToValidUTF8(note, "\uFFFD")
	return c, fixed
}

var timestampName = (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()

// unencodable lists the fields under m that protojson cannot write, by
// path, and with fix replaces them.
func unencodable(m protoreflect.Message, path string, fix bool) []string {
	var bad []string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := path + string(fd.Name())
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					bad = append(bad, unencodable(mv.Message(), name+"["+k.String()+"].", fix)...)
				} else if fd.MapValue().Kind() == protoreflect.StringKind && !utf8.ValidString(mv.String()) {
					bad = append(bad, name+"["+k.String()+"]")
					if fix {
						v.Map().Set(k, protoreflect.ValueOfString(strings.ToValidUTF8(mv.String(), "\uFFFD")))
					}
				}
				return true
			})
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				switch fd.Kind() {
				case protoreflect.MessageKind:
					bad = append(bad, unencodable(l.Get(i).Message(), name+"[].", fix)...)
				case protoreflect.StringKind:
					if s := l.Get(i).String(); !utf8.ValidString(s) {
						bad = append(bad, name+"[]")
						if fix {
							l.Set(i, protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD")))
						}
					}
				}
			}
		case fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == timestampName:
			if ts, ok := v.Message().Interface().(*timestamppb.Timestamp); ok && ts.CheckValid() != nil {
				bad = append(bad, name)
				if fix {
					m.Clear(fd)
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			bad = append(bad, unencodable(v.Message(), name+".", fix)...)
		case fd.Kind() == protoreflect.StringKind && !utf8.ValidString(v.String()):
			bad = append(bad, name)
			if fix {
				m.Set(fd, protoreflect.ValueOfString(strings.ToValidUTF8(v.String(), "\uFFFD")))
			}
		}
		return true
	})
	return bad
}
