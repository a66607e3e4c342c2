package patterns

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ArgKind is what a tool argument holds, as the guard reads it.
type ArgKind uint8

const (
	ArgNumber   ArgKind = iota + 1 // 71.25, "71.25", "$71.25", "71,25 EUR"
	ArgDate                        // "2026-12-08"
	ArgTime                        // "15:00", "15:00:00", "3:00 PM"
	ArgDateTime                    // "2026-12-08T15:00:00", with or without seconds and zone
	ArgCurrency                    // "USD": an ISO 4217 code, in capitals, alone
)

// An Arg is a tool argument's value as the guard reads it: a JSON number,
// a numeric string ("71.25", "$71.25"), an ISO date ("2026-12-08"), a time
// ("15:00", "3:00 PM"), an ISO date-time ("2026-12-08T15:00:00"), or a
// currency code ("USD", the currency of the call's amounts).
type Arg struct {
	Kind ArgKind
	// ArgNumber: Units × 10^-Scale, exactly; Currency its ISO code when
	// the string names one ("USD 71.25", "€71.25"), else "". ArgCurrency:
	// Currency alone.
	Units    int64
	Scale    uint8
	Currency string
	// ArgDate and ArgDateTime.
	Year       int
	Month, Day int
	// ArgTime and ArgDateTime: minutes since midnight, and seconds past
	// them (a spoken time never states seconds: a time with seconds other
	// than 0 matches no value).
	Minutes, Seconds int
}

// isoCurrencies are the active ISO 4217 codes: an argument that is one
// alone names the call's currency. A standard's codes, not a language's
// words.
const isoCurrencies = "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD " +
	"CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD " +
	"HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD " +
	"MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG " +
	"QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD " +
	"TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWL"

// argSymbols are the currency signs an argument's string may carry. They
// are signs of ISO 4217, not words of a language; "$" names several
// currencies and so none.
var argSymbols = map[string]string{"$": "", "us$": "USD", "€": "EUR", "£": "GBP", "r$": "BRL", "¥": ""}

// ParseArg reads a tool argument as it comes from JSON (float64, string,
// bool or nil). A number becomes an exact decimal through its shortest
// representation, so 71.25 is 7125/100 and 0.1+0.2 is not 0.3. It reports
// false for what is no amount, date or time, and for strings it cannot
// read without guessing ("1,200": 1200 or 1.2?): the guard then compares
// the words.
func ParseArg(v any) (Arg, bool) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Arg{}, false
		}
		s := strconv.FormatFloat(x, 'f', -1, 64)
		neg := strings.HasPrefix(s, "-")
		units, scale, _, ok := parseDecimal(strings.TrimPrefix(s, "-"), '.')
		if !ok {
			return Arg{}, false
		}
		if neg {
			units = -units
		}
		return Arg{Kind: ArgNumber, Units: units, Scale: scale}, true
	case string:
		return parseArgString(strings.TrimSpace(x))
	}
	return Arg{}, false
}

func parseArgString(s string) (Arg, bool) {
	if s == "" || len(s) > 64 {
		return Arg{}, false
	}
	if len(s) == 3 && strings.Contains(isoCurrencies, s) && strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0 {
		return Arg{Kind: ArgCurrency, Currency: s}, true
	}
	if a, ok := parseArgDateTime(s); ok {
		return a, true
	}
	if a, ok := parseArgTime(s); ok {
		return a, true
	}
	return parseArgAmount(s)
}

// parseArgAmount reads "71.25", "$71.25", "71,25 €", "USD 71.25",
// "1,200.50".
func parseArgAmount(s string) (Arg, bool) {
	a := Arg{Kind: ArgNumber}
	low := Fold(s)
	start := strings.IndexFunc(low, func(r rune) bool { return r >= '0' && r <= '9' })
	if start < 0 {
		return Arg{}, false
	}
	end := strings.LastIndexFunc(low, func(r rune) bool { return r >= '0' && r <= '9' }) + 1
	body := low[start:end]
	for _, affix := range []string{strings.TrimSpace(low[:start]), strings.TrimSpace(low[end:])} {
		if affix == "" {
			continue
		}
		if a.Currency != "" || affix == "-" {
			return Arg{}, false
		}
		if code, ok := argSymbols[affix]; ok {
			a.Currency = code
			if code == "" {
				a.Currency = "?"
			}
			continue
		}
		if len(affix) != 3 || strings.IndexFunc(affix, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
			return Arg{}, false
		}
		a.Currency = strings.ToUpper(affix)
	}
	if a.Currency == "?" {
		a.Currency = ""
	}
	// The separators: both, the last is the decimal mark; one that
	// repeats or stands before three digits is unsure ("1,200": 1200 or
	// 1.2), and refused.
	dec := byte(0)
	lastDot, lastComma := strings.LastIndexByte(body, '.'), strings.LastIndexByte(body, ',')
	switch {
	case lastDot >= 0 && lastComma >= 0:
		dec = '.'
		if lastComma > lastDot {
			dec = ','
		}
	case lastDot >= 0 || lastComma >= 0:
		sep, idx := byte('.'), lastDot
		if lastComma >= 0 {
			sep, idx = ',', lastComma
		}
		if strings.Count(body, string(sep)) > 1 || len(body)-idx-1 == 3 {
			return Arg{}, false
		}
		dec = sep
	}
	units, scale, _, ok := parseDecimal(body, dec)
	if !ok {
		return Arg{}, false
	}
	a.Units, a.Scale = units, scale
	return a, true
}

// parseArgDateTime reads "2026-12-08", "2026-12-08T15:00", with seconds,
// a fraction and a zone ("Z", "+01:00"), or a space for the "T". The zone
// is not applied: the time is compared as written.
func parseArgDateTime(s string) (Arg, bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' || !isDigits(s[:4]) || !isDigits(s[5:7]) || !isDigits(s[8:10]) {
		return Arg{}, false
	}
	a := Arg{Kind: ArgDate, Year: int(atoi(s[:4])), Month: int(atoi(s[5:7])), Day: int(atoi(s[8:10]))}
	if !validDate(int64(a.Month), int64(a.Day)) || a.Day > daysIn(a.Year, a.Month) {
		return Arg{}, false
	}
	if len(s) == 10 {
		return a, true
	}
	if s[10] != 'T' && s[10] != 't' && s[10] != ' ' {
		return Arg{}, false
	}
	rest := s[11:]
	if i := strings.IndexAny(rest, "Zz+-"); i >= 0 {
		zone := rest[i:]
		rest = rest[:i]
		if !(zone == "Z" || zone == "z" || len(zone) == 6 && zone[3] == ':' && isDigits(zone[1:3]) && isDigits(zone[4:])) {
			return Arg{}, false
		}
	}
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		if !isDigits(rest[i+1:]) || strings.Trim(rest[i+1:], "0") != "" {
			return Arg{}, false
		}
		rest = rest[:i]
	}
	t, ok := parseClock24(rest)
	if !ok {
		return Arg{}, false
	}
	a.Kind, a.Minutes, a.Seconds = ArgDateTime, t.Minutes, t.Seconds
	return a, true
}

// parseClock24 reads "15:00" or "15:00:30".
func parseClock24(s string) (Arg, bool) {
	c := strings.IndexByte(s, ':')
	if c < 1 || c > 2 || len(s) < c+3 || !isDigits(s[:c]) || !isDigits(s[c+1:c+3]) {
		return Arg{}, false
	}
	h, m := atoi(s[:c]), atoi(s[c+1:c+3])
	sec := int64(0)
	if rest := s[c+3:]; rest != "" {
		if len(rest) != 3 || rest[0] != ':' || !isDigits(rest[1:]) {
			return Arg{}, false
		}
		sec = atoi(rest[1:])
	}
	if h > 23 || m > 59 || sec > 59 {
		return Arg{}, false
	}
	return Arg{Kind: ArgTime, Minutes: int(h*60 + m), Seconds: int(sec)}, true
}

// parseArgTime reads "15:00", "15:00:00", "3:00 PM", "3pm", "3:00 a.m.".
func parseArgTime(s string) (Arg, bool) {
	low := strings.ToLower(s)
	meridiem := 0
	for _, suf := range []struct {
		s string
		m int
	}{{"a.m.", 1}, {"p.m.", 2}, {"am", 1}, {"pm", 2}} {
		if strings.HasSuffix(low, suf.s) {
			meridiem, low = suf.m, strings.TrimSpace(strings.TrimSuffix(low, suf.s))
			break
		}
	}
	if meridiem == 0 {
		return parseClock24(low)
	}
	var a Arg
	var ok bool
	if isDigits(low) && len(low) <= 2 {
		a, ok = Arg{Kind: ArgTime, Minutes: int(atoi(low) * 60)}, true
	} else {
		a, ok = parseClock24(low)
	}
	h := a.Minutes / 60
	if !ok || h < 1 || h > 12 {
		return Arg{}, false
	}
	a.Minutes %= 720
	if meridiem == 2 {
		a.Minutes += 720
	}
	return a, true
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// weekday of an argument's date, 1 (Monday) to 7 (Sunday).
func (a Arg) weekday() int {
	wd := int(time.Date(a.Year, time.Month(a.Month), a.Day, 0, 0, 0, 0, time.UTC).Weekday())
	if wd == 0 {
		return 7
	}
	return wd
}

// decEqual compares two exact decimals.
func decEqual(u1 int64, s1 uint8, u2 int64, s2 uint8) bool {
	for s1 > s2 {
		if u1%10 != 0 {
			return false
		}
		u1, s1 = u1/10, s1-1
	}
	for s2 > s1 {
		if u2%10 != 0 {
			return false
		}
		u2, s2 = u2/10, s2-1
	}
	return u1 == u2
}

// numberIs: v, a Number or Amount, is a's value, in a currency that does
// not contradict a's.
func (v Value) numberIs(a Arg) bool {
	if a.Kind != ArgNumber || (v.Kind != ValueNumber && v.Kind != ValueAmount) {
		return false
	}
	if v.Currency != "" && a.Currency != "" && v.Currency != a.Currency {
		return false
	}
	return decEqual(v.Units, v.Scale, a.Units, a.Scale)
}

// amountIs: a is v's number, or the currency v is said in.
func (v Value) amountIs(a Arg) bool {
	if a.Kind == ArgCurrency {
		return v.Currency == a.Currency
	}
	return v.numberIs(a)
}

// dateAgrees: every part of a date v states is a's ("Tuesday the 8th"
// and 2026-12-08, a Tuesday). An unsure numeric date agrees with nothing.
func (v Value) dateAgrees(a Arg) bool {
	if !v.HasDate() || (a.Kind != ArgDate && a.Kind != ArgDateTime) || v.DayMonthUnsure {
		return false
	}
	if v.Year == 0 && v.Month == 0 && v.Day == 0 && v.Weekday == 0 {
		return false
	}
	return (v.Year == 0 || int(v.Year) == a.Year) && (v.Month == 0 || int(v.Month) == a.Month) &&
		(v.Day == 0 || int(v.Day) == a.Day) && (v.Weekday == 0 || int(v.Weekday) == a.weekday())
}

// timeReadings returns the minutes a time v may mean: one, or two when no
// am or pm was said.
func (v Value) timeReadings() (int, int) {
	t := int(v.Minutes)
	// "Twelve" said alone is noon: a reading of midnight would book
	// 00:00 on "um zwölf Uhr".
	if v.EitherHalf && (t < 720 || t >= 780) {
		return t, (t + 720) % 1440
	}
	return t, t
}

// timeIs: a's time is the reading t of v.
func timeIs(t int, a Arg) bool {
	return (a.Kind == ArgTime || a.Kind == ArgDateTime) && a.Seconds == 0 && a.Minutes == t
}

// Matches reports whether value v states argument a exactly: an amount
// in minor units (71.25 ≠ 71.2 ≠ 71.250001; a stated currency must be
// a's); a date whose stated parts all agree and that names the day
// ("Tuesday the 8th", "December 8"; a weekday alone does not, see
// Agrees); a time whose stated reading agrees (3 pm is 15:00; "at 3" is
// 3:00 or 15:00, see MatchArgs for when that counts); a date-time
// argument only by a value that states both. A Relative or Unclear value
// matches nothing.
func (v Value) Matches(a Arg) bool {
	switch v.Kind {
	case ValueNumber, ValueAmount:
		return v.amountIs(a)
	case ValueDate:
		return a.Kind == ArgDate && v.Day != 0 && v.dateAgrees(a)
	case ValueTime:
		t1, t2 := v.timeReadings()
		return a.Kind == ArgTime && (timeIs(t1, a) || timeIs(t2, a))
	case ValueDateTime:
		t1, t2 := v.timeReadings()
		switch a.Kind {
		case ArgDate:
			return v.Day != 0 && v.dateAgrees(a)
		case ArgTime:
			return timeIs(t1, a) || timeIs(t2, a)
		case ArgDateTime:
			return v.Day != 0 && v.dateAgrees(a) && (timeIs(t1, a) || timeIs(t2, a))
		}
	}
	return false
}

// Agrees reports whether nothing v states contradicts a and a holds all
// v states: a weekday alone agrees with any date on that weekday, a date
// with a date-time on that day. Use it to tell whether a value is the
// value of an argument at all; Matches tells whether it states it.
func (v Value) Agrees(a Arg) bool {
	switch v.Kind {
	case ValueNumber, ValueAmount:
		return v.amountIs(a)
	case ValueDate:
		return v.dateAgrees(a)
	case ValueTime:
		t1, t2 := v.timeReadings()
		return timeIs(t1, a) || timeIs(t2, a)
	case ValueDateTime:
		t1, t2 := v.timeReadings()
		return a.Kind == ArgDateTime && v.dateAgrees(a) && (timeIs(t1, a) || timeIs(t2, a))
	}
	return false
}

// ArgMatch is how a sentence's values meet a call's arguments.
type ArgMatch struct {
	// Stated has bit i set when the values state args[i] (Matches), a
	// date-time also by a date and a time stated apart ("on Tuesday the
	// 8th, ... at 3 pm").
	Stated uint64
	// Stray has bit j set when vals[j] is the value of no argument: a
	// number no argument holds, a Relative or Unclear value, a time that
	// may be either of two arguments ("at 3" with 3:00 and 15:00 both
	// among them).
	Stray uint64
}

// MatchArgs matches a sentence's values against a call's arguments (at
// most 64 of each: the rest are never stated, and stray). A time said
// without am or pm ("at 3") counts as 3:00 or 15:00 only when exactly one
// of its readings is among the arguments. A date-time value is matched by
// its parts: its date and its time must each be some argument's. An amount
// whose currency is said must be in the call's currency when an argument
// names one ({"amount": 71.25, "currency": "USD"}), and then states it too.
func MatchArgs(vals []Value, args []Arg) ArgMatch {
	var m ArgMatch
	var dateStated, timeStated uint64
	currencies := argBits(args, func(a Arg) bool { return a.Kind == ArgCurrency })
	for j, v := range vals {
		if j >= 64 {
			break
		}
		var explained bool
		switch v.Kind {
		case ValueNumber, ValueAmount:
			// A currency said must be the call's, when the call names
			// one: "71.25 euros" does not pay 71.25 with currency USD.
			cur := argBits(args, func(a Arg) bool { return a.Kind == ArgCurrency && a.Currency == v.Currency })
			if v.Currency != "" && currencies != 0 && cur == 0 {
				break
			}
			bits := argBits(args, func(a Arg) bool { return v.numberIs(a) })
			m.Stated |= bits
			if bits != 0 {
				m.Stated |= cur
			}
			explained = bits != 0
		case ValueDate, ValueTime, ValueDateTime:
			explained = true
			if v.HasDate() {
				agree := argBits(args, func(a Arg) bool { return v.dateAgrees(a) })
				if v.Day != 0 {
					dateStated |= agree
				}
				explained = agree != 0
			}
			if v.HasTime() {
				t1, t2 := v.timeReadings()
				r1 := argBits(args, func(a Arg) bool { return timeIs(t1, a) })
				r2 := argBits(args, func(a Arg) bool { return timeIs(t2, a) })
				bits := r1 | r2
				if t1 != t2 && r1 != 0 && r2 != 0 {
					bits = 0 // "at 3" with both 3:00 and 15:00 among the arguments
				}
				timeStated |= bits
				explained = explained && bits != 0
			}
		}
		if !explained {
			m.Stray |= 1 << j
		}
	}
	for i, a := range args {
		if i >= 64 {
			break
		}
		bit := uint64(1) << i
		switch a.Kind {
		case ArgDate:
			m.Stated |= dateStated & bit
		case ArgTime:
			m.Stated |= timeStated & bit
		case ArgDateTime:
			m.Stated |= dateStated & timeStated & bit
		}
	}
	return m
}

func argBits(args []Arg, f func(Arg) bool) uint64 {
	var bits uint64
	for i, a := range args {
		if i < 64 && f(a) {
			bits |= 1 << i
		}
	}
	return bits
}
