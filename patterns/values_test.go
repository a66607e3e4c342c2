package patterns

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// show writes a value the way the tables below expect it: its kind, its
// words, then what it states.
func show(v Value) string {
	b := &strings.Builder{}
	fmt.Fprintf(b, "%s[%s]", v.Kind, v.Text)
	switch v.Kind {
	case ValueNumber, ValueAmount:
		fmt.Fprintf(b, " %s", decimalString(v.Units, v.Scale))
		if v.Currency != "" {
			fmt.Fprintf(b, " %s", v.Currency)
		}
	}
	if v.HasDate() {
		for _, p := range []struct {
			name string
			n    int
		}{{"y", int(v.Year)}, {"m", int(v.Month)}, {"d", int(v.Day)}, {"wd", int(v.Weekday)}} {
			if p.n != 0 {
				fmt.Fprintf(b, " %s%d", p.name, p.n)
			}
		}
		if v.DayMonthUnsure {
			b.WriteString(" unsure")
		}
	}
	if v.HasTime() {
		fmt.Fprintf(b, " %02d:%02d", v.Minutes/60, v.Minutes%60)
		if v.EitherHalf {
			b.WriteString(" either")
		}
	}
	return b.String()
}

func decimalString(units int64, scale uint8) string {
	s := strconv.FormatInt(units, 10)
	if scale == 0 {
		return s
	}
	for len(s) <= int(scale) {
		s = "0" + s
	}
	return s[:len(s)-int(scale)] + "." + s[len(s)-int(scale):]
}

// valuesOf reads every sentence of text.
func valuesOf(l *Locale, text string) []string {
	var out []string
	for _, s := range l.Parse(text).Sentences {
		for _, v := range l.Values(s) {
			out = append(out, show(v))
		}
	}
	return out
}

type valueCase struct {
	text string
	want []string // nil: no value
}

func checkValues(t *testing.T, lang string, cases []valueCase) {
	t.Helper()
	l := locale(t, lang)
	for _, tc := range cases {
		got := valuesOf(l, tc.text)
		if strings.Join(got, " ; ") != strings.Join(tc.want, " ; ") {
			t.Errorf("%s %q:\n got  %q\n want %q", lang, tc.text, got, tc.want)
		}
	}
}

func TestValuesEnglish(t *testing.T) {
	checkValues(t, "en", []valueCase{
		// Figures, symbols, codes, words for money.
		{"Shall I pay the $71.25 now?", []string{"amount[$71.25] 71.25 USD"}},
		{"Shall I pay €71.25?", []string{"amount[€71.25] 71.25 EUR"}},
		{"Shall I pay USD 71.25?", []string{"amount[usd 71.25] 71.25 USD"}},
		{"Shall I pay 71.25 USD?", []string{"amount[71.25 usd] 71.25 USD"}},
		{"Shall I pay $1,200.50?", []string{"amount[$1,200.50] 1200.50 USD"}},
		{"Shall I transfer 1,200?", []string{"number[1,200] 1200"}},
		{"Would you like me to pay 71 dollars and 25 cents?", []string{"amount[71 dollars and 25 cents] 71.25 USD"}},
		{"one hundred twenty dollars fifty", []string{"amount[one hundred twenty dollars fifty] 120.50 USD"}},
		{"Shall I pay one hundred and twenty dollars and fifty cents?", []string{"amount[one hundred and twenty dollars and fifty cents] 120.50 USD"}},
		{"That will be fifty cents.", []string{"amount[fifty cents] 0.50"}},
		{"I can do a hundred dollars.", []string{"amount[a hundred dollars] 100 USD"}},
		{"It costs a dollar.", []string{"amount[a dollar] 1 USD"}},
		{"twelve hundred dollars", []string{"amount[twelve hundred dollars] 1200 USD"}},
		{"two thousand five hundred and twelve", []string{"number[two thousand five hundred and twelve] 2512"}},
		{"nine hundred ninety-nine thousand nine hundred ninety-nine", []string{"number[nine hundred ninety-nine thousand nine hundred ninety-nine] 999999"}},
		{"twenty-one", []string{"number[twenty-one] 21"}},
		{"seventy-one point two five", []string{"number[seventy-one point two five] 71.25"}},
		{"Your previous bill was $64.00; the new total is $71.25.", []string{"amount[$64.00] 64.00 USD", "amount[$71.25] 71.25 USD"}},
		// Refused rather than guessed: 71.25? 7125? 71 and 25?
		{"Shall I charge seventy-one twenty-five?", []string{"unclear[seventy-one twenty-five]"}},
		{"one twenty fifty", []string{"unclear[one twenty fifty]"}},
		{"twenty dollars five", []string{"amount[twenty dollars] 20 USD", "number[five] 5"}},
		{"it will be about a dollar fifty", []string{"amount[a dollar fifty] 1.50 USD"}},
		{"Shall I transfer 500 euros to account 12345678?", []string{"amount[500 euros] 500 EUR", "number[12345678] 12345678"}},
		{"The total is two hundred and five dollars and six cents.", []string{"amount[two hundred and five dollars and six cents] 205.06 USD"}},
		{"Shall I pay $50 and 2 tickets?", []string{"amount[$50] 50 USD", "number[2] 2"}},
		{"That's 20 dollars, 50 with the fee.", []string{"amount[20 dollars] 20 USD", "number[50] 50"}},
		{"twenty, five", []string{"number[twenty] 20", "number[five] 5"}},
		{"at 3, 15 people", []string{"time[at 3] 03:00 either", "number[15] 15"}},
		{"999999999999999999 dollars fifty", []string{"amount[999999999999999999 dollars] 999999999999999999 USD", "number[fifty] 50"}},
		// Digit by digit.
		{"Your appeal number is four five two.", []string{"number[four five two] 452"}},
		// Dates.
		{"Shall I book you for Tuesday, December 8 at 3 pm?", []string{"datetime[tuesday, december 8 at 3 pm] m12 d8 wd2 15:00"}},
		{"Tuesday the 8th", []string{"date[tuesday the 8th] d8 wd2"}},
		{"the 21st of December", []string{"date[the 21st of december] m12 d21"}},
		{"Tuesday, the twenty-first", []string{"date[tuesday, the twenty-first] d21 wd2"}},
		{"Shall I book it for the eighth?", []string{"date[for the eighth] d8"}},
		{"December 8th, 2026", []string{"date[december 8th, 2026] y2026 m12 d8"}},
		{"Shall I book it for Dec. 8?", []string{"date[dec. 8] m12 d8"}},
		{"2026-12-08", []string{"date[2026-12-08] y2026 m12 d8"}},
		// US and British readings differ: unsure. Only one is a date: sure.
		{"12/08/2026", []string{"date[12/08/2026] y2026 m8 d12 unsure"}},
		{"Is 12/25 OK?", []string{"date[12/25] m12 d25"}},
		{"08/08", []string{"date[08/08] m8 d8"}},
		{"May I book it for May 3rd?", []string{"date[may 3rd] m5 d3"}},
		{"Shall I book it in December?", []string{"date[in december] m12"}},
		{"May I go ahead and book it?", nil},
		{"Shall we march on?", nil},
		{"I sat in the sun on Wednesday.", []string{"date[on wednesday] wd3"}},
		{"Shall I book it for tomorrow?", []string{"relative[tomorrow]"}},
		{"Shall I book Monday?", []string{"date[monday] wd1"}},
		// Times.
		{"at 3", []string{"time[at 3] 03:00 either"}},
		{"Would you like the appointment at 8?", []string{"time[at 8] 08:00 either"}},
		{"at 15", []string{"time[at 15] 15:00"}},
		{"15:00", []string{"time[15:00] 15:00"}},
		{"09:30", []string{"time[09:30] 09:30"}},
		{"3:30pm", []string{"time[3:30pm] 15:30"}},
		{"Shall I book 3 p.m. for you?", []string{"time[3 p.m] 15:00"}},
		{"Shall I book the nine o'clock slot?", []string{"time[nine o'clock] 09:00 either"}},
		{"three in the afternoon", []string{"time[three in the afternoon] 15:00"}},
		{"half past three", []string{"time[half past three] 03:30 either"}},
		{"quarter to four", []string{"time[quarter to four] 03:45 either"}},
		{"at ten to four", []string{"time[at ten to four] 03:50 either"}},
		{"from ten to four", []string{"number[ten] 10", "number[four] 4"}},
		{"at three thirty", []string{"time[at three thirty] 03:30 either"}},
		{"at three oh five pm", []string{"time[at three oh five pm] 15:05"}},
		{"book you in for three thirty pm on tuesday the eighth", []string{"datetime[three thirty pm on tuesday the eighth] d8 wd2 15:30"}},
		{"should i put the eleven forty five appointment on hold", []string{"unclear[eleven forty five]"}},
		{"shall i book you in for half ten on wednesday", []string{"datetime[half ten on wednesday] wd3 10:30 either"}},
		{"Shall I schedule your appointment for 10:30 a.m. on Monday, June 3rd?", []string{"datetime[10:30 a.m\u2024 on monday, june 3rd] m6 d3 wd1 10:30"}},
		{"your appointment is on the first of march at two in the afternoon", []string{"datetime[on the first of march at two in the afternoon] m3 d1 14:00"}},
		{"at a quarter past nine", []string{"time[at a quarter past nine] 09:15 either"}},
		{"at 9 30", []string{"time[at 9 30] 09:30 either"}},
		{"Shall I book it for 9 30?", []string{"number[9] 9", "number[30] 30"}},
		{"half past nine in the evening", []string{"time[half past nine in the evening] 21:30"}},
		{"eleven at night", []string{"time[eleven at night] 23:00"}},
		{"noon", []string{"time[noon] 12:00"}},
		{"12 noon", []string{"time[12 noon] 12:00"}},
		{"midnight", []string{"time[midnight] 00:00"}},
		{"12 am", []string{"time[12 am] 00:00"}},
		{"15 am", []string{"unclear[15 am]"}},
		{"Shall I book the 9:45 or the nine o'clock?", []string{"time[9:45] 09:45 either", "time[nine o'clock] 09:00 either"}},
		{"2 pm tomorrow", []string{"time[2 pm] 14:00", "relative[tomorrow]"}},
		// Traps: not numbers.
		{"I'll be there in a second.", nil},
		{"Is that a second question?", nil},
		{"Shall I book the first available slot?", nil},
		{"Shall I book this one?", nil},
		{"Just one moment, shall I submit it?", nil},
		{"Shall I send a copy?", nil},
		// The judge decides what a plain number counts.
		{"Shall I book one of the two?", []string{"number[one] 1", "number[two] 2"}},
		{"Shall I send one?", []string{"number[one] 1"}},
		{"Shall I book 2 tickets for 3 people?", []string{"number[2] 2", "number[3] 3"}},
		{"That's 0.1 and 0.2.", []string{"number[0.1] 0.1", "number[0.2] 0.2"}},
	})
}

func TestValuesSpanish(t *testing.T) {
	checkValues(t, "es", []valueCase{
		{"¿Le cobro ciento veinte con cincuenta?", []string{"number[ciento veinte con cincuenta] 120.50"}},
		{"¿Le cobro ciento veinte pesos con cincuenta?", []string{"amount[ciento veinte pesos con cincuenta] 120.50"}},
		{"Son veinte pesos con cincuenta centavos.", []string{"amount[veinte pesos con cincuenta centavos] 20.50"}},
		{"tres con cinco", []string{"unclear[tres con cinco]"}},
		{"¿Pago los 71,25 € ahora?", []string{"amount[71,25 €] 71.25 EUR"}},
		{"¿Quiere que le pague $ 1.200,50?", []string{"amount[$ 1.200,50] 1200.50"}},
		{"doscientos treinta y cinco dólares", []string{"amount[doscientos treinta y cinco dolares] 235 USD"}},
		{"mil doscientos euros", []string{"amount[mil doscientos euros] 1200 EUR"}},
		{"veintiún euros", []string{"amount[veintiun euros] 21 EUR"}},
		{"ciento un euros", []string{"amount[ciento un euros] 101 EUR"}},
		{"un euro", []string{"amount[un euro] 1 EUR"}},
		{"veintiuno", []string{"number[veintiuno] 21"}},
		{"¿Le reservo el martes 8 de diciembre a las tres de la tarde?", []string{"datetime[el martes 8 de diciembre a las tres de la tarde] m12 d8 wd2 15:00"}},
		{"¿Le reservo el jueves 10 a las nueve y media de la mañana?", []string{"datetime[el jueves 10 a las nueve y media de la manana] d10 wd4 09:30"}},
		{"¿Agendo la cita para el día 15 de marzo de 2027?", []string{"date[el dia 15 de marzo de 2027] y2027 m3 d15"}},
		{"el 1º de diciembre", []string{"date[el 1º de diciembre] m12 d1"}},
		{"¿Reservo para el ocho?", []string{"date[para el ocho] d8"}},
		{"08/12/2026", []string{"date[08/12/2026] y2026 m12 d8"}},
		{"¿Confirmo la cita para mañana a las 10?", []string{"relative[manana]", "time[a las 10] 10:00 either"}},
		{"¿Le agendo a la una y media?", []string{"time[a la una y media] 01:30 either"}},
		{"las cuatro menos cuarto", []string{"time[las cuatro menos cuarto] 03:45 either"}},
		{"a las cuatro menos diez", []string{"time[a las cuatro menos diez] 03:50 either"}},
		{"a las 21:30", []string{"time[a las 21:30] 21:30"}},
		{"¿Le reservo una mesa a las 21 h?", []string{"time[a las 21 h] 21:00"}},
		{"al mediodía", []string{"time[mediodia] 12:00"}},
		{"a las doce de la noche", []string{"time[a las doce de la noche] 00:00"}},
		{"mañana por la mañana", []string{"relative[manana]"}},
		// Articles are not numbers: "una" and "un" alone.
		{"¿Le paso una factura?", nil},
		{"¿Le reservo una mesa para dos?", []string{"number[dos] 2"}},
		{"¿Pago las 3 facturas?", []string{"number[3] 3"}},
		{"Cada uno paga lo suyo.", nil},
		{"¿Pago setenta y un euros con veinticinco?", []string{"amount[setenta y un euros con veinticinco] 71.25 EUR"}},
		{"¿Confirmo la reserva para el sábado 14 a las 20:30?", []string{"datetime[para el sabado 14 a las 20:30] d14 wd6 20:30"}},
		{"¿Le reservo para las ocho y media de la noche?", []string{"time[para las ocho y media de la noche] 20:30"}},
		{"le reservo para el jueves a las cinco y cuarto de la tarde", []string{"datetime[para el jueves a las cinco y cuarto de la tarde] wd4 17:15"}},
		{"a las 3 y 15", []string{"time[a las 3 y 15] 03:15 either"}},
		{"son mil quinientos pesos", []string{"amount[mil quinientos pesos] 1500"}},
	})
}

func TestValuesGerman(t *testing.T) {
	checkValues(t, "de", []valueCase{
		{"Soll ich die 120,50 € jetzt bezahlen?", []string{"amount[120,50 €] 120.50 EUR"}},
		{"Soll ich den Betrag von 1.200,50 Euro überweisen?", []string{"amount[1.200,50 euro] 1200.50 EUR"}},
		{"hundertzwanzig Euro fünfzig", []string{"amount[hundertzwanzig euro funfzig] 120.50 EUR"}},
		{"einhundertzwanzig Euro", []string{"amount[einhundertzwanzig euro] 120 EUR"}},
		{"zweihundert Euro", []string{"amount[zweihundert euro] 200 EUR"}},
		{"einundzwanzig", []string{"number[einundzwanzig] 21"}},
		{"zweihundertfünfundachtzig", []string{"number[zweihundertfunfundachtzig] 285"}},
		{"neunhundertneunundneunzigtausendneunhundertneunundneunzig", []string{"number[neunhundertneunundneunzigtausendneunhundertneunundneunzig] 999999"}},
		{"ein Euro fünfzig", []string{"amount[ein euro funfzig] 1.50 EUR"}},
		{"zwei Euro fünf", []string{"amount[zwei euro] 2 EUR", "number[funf] 5"}},
		{"Soll ich den Termin am Dienstag, den 8. Dezember, um 15 Uhr buchen?", []string{"datetime[am dienstag, den 8. dezember, um 15 uhr] m12 d8 wd2 15:00"}},
		{"Soll ich Ihnen den Termin am Freitag um 9 Uhr buchen?", []string{"datetime[am freitag um 9 uhr] wd5 09:00 either"}},
		{"am achten Dezember", []string{"date[am achten dezember] m12 d8"}},
		{"am 08.12.2026 um 9:45 Uhr", []string{"datetime[08.12.2026 um 9:45 uhr] y2026 m12 d8 09:45 either"}},
		{"um halb vier", []string{"time[um halb vier] 03:30 either"}},
		{"um 3 Uhr nachmittags", []string{"time[um 3 uhr nachmittags] 15:00"}},
		{"um 15 Uhr 30", []string{"time[um 15 uhr 30] 15:30"}},
		{"Viertel vor vier", []string{"time[viertel vor vier] 03:45 either"}},
		{"zehn nach drei", []string{"time[zehn nach drei] 03:10 either"}},
		{"Soll ich morgen buchen?", []string{"relative[morgen]"}},
		{"Soll ich es am Morgen buchen?", nil},
		{"Soll ich es im Mai buchen?", []string{"date[im mai] m5"}},
		// Articles and greetings are not numbers or dates.
		{"Guten Morgen, soll ich das buchen?", nil},
		{"Soll ich einen Termin buchen?", nil},
		{"Ja, einen Kaffee.", nil},
		{"Soll ich zwei Tickets buchen?", []string{"number[zwei] 2"}},
		{"Soll ich erst prüfen?", nil},
		{"soll ich die einundsiebzig euro fünfundzwanzig jetzt zahlen", []string{"amount[einundsiebzig euro funfundzwanzig] 71.25 EUR"}},
		{"soll ich den termin am dreizehnten mai um zehn uhr buchen", []string{"datetime[am dreizehnten mai um zehn uhr] m5 d13 10:00 either"}},
		{"am Freitag, dem 12. Mai, um 10:30 Uhr", []string{"datetime[am freitag, dem 12. mai, um 10:30 uhr] m5 d12 wd5 10:30 either"}},
		{"um 14.30 Uhr", []string{"time[um 14.30 uhr] 14:30"}},
		{"Der Termin wäre am Dienstag um 10. Soll ich den buchen?", []string{"datetime[am dienstag um 10] wd2 10:00 either"}},
		{"am 12.05. um 10 Uhr", []string{"datetime[12.05. um 10 uhr] m5 d12 10:00 either"}},
		{"Soll ich den Termin am 15.12. um 16:30 Uhr bestätigen?", []string{"datetime[15.12. um 16:30 uhr] m12 d15 16:30"}},
		{"1.200.000 Euro", []string{"amount[1.200.000 euro] 1200000 EUR"}},
	})
}

func TestValuesFrench(t *testing.T) {
	checkValues(t, "fr", []valueCase{
		{"Je paie les 1 200,50 € ?", []string{"amount[1 200,50 €] 1200.50 EUR"}},
		{"cent vingt euros cinquante", []string{"amount[cent vingt euros cinquante] 120.50 EUR"}},
		{"Je règle la facture de quatre-vingt-dix-neuf euros ?", []string{"amount[quatre-vingt-dix-neuf euros] 99 EUR"}},
		{"quatre-vingt-dix-sept", []string{"number[quatre-vingt-dix-sept] 97"}},
		{"soixante et onze", []string{"number[soixante et onze] 71"}},
		{"soixante-dix", []string{"number[soixante-dix] 70"}},
		{"deux cents euros", []string{"amount[deux cents euros] 200 EUR"}},
		{"vingt et un", []string{"number[vingt et un] 21"}},
		{"un euro", []string{"amount[un euro] 1 EUR"}},
		{"le mardi 8 décembre à 15h", []string{"datetime[le mardi 8 decembre a 15h] m12 d8 wd2 15:00"}},
		{"le 1er décembre", []string{"date[le 1er decembre] m12 d1"}},
		{"le huit décembre", []string{"date[le huit decembre] m12 d8"}},
		{"Voulez-vous que je réserve pour vendredi 12 à 9h ?", []string{"datetime[vendredi 12 a 9h] d12 wd5 09:00 either"}},
		{"à trois heures de l'après-midi", []string{"time[a trois heures de l'apres-midi] 15:00"}},
		{"à 15h30", []string{"time[a 15h30] 15:30"}},
		{"à 15 h 30", []string{"time[a 15 h 30] 15:30"}},
		{"quatre heures moins le quart", []string{"time[quatre heures moins le quart] 03:45 either"}},
		{"trois heures et demie", []string{"time[trois heures et demie] 03:30 either"}},
		{"à midi", []string{"time[a midi] 12:00"}},
		{"cet après-midi", []string{"relative[cet apres-midi]"}},
		{"demain à 10h", []string{"relative[demain]", "time[a 10h] 10:00 either"}},
		// "un" and "une" alone are articles; "il y a 3 factures" has no time.
		{"Je vous réserve une table ?", nil},
		{"Il y a 3 factures.", []string{"number[3] 3"}},
		{"dans deux heures", []string{"number[deux] 2"}},
		{"soixante-et-onze euros vingt-cinq", []string{"amount[soixante-et-onze euros vingt-cinq] 71.25 EUR"}},
		{"Je vous réserve pour le 3 juin à 20 heures ?", []string{"datetime[pour le 3 juin a 20 heures] m6 d3 20:00"}},
		{"je vous réserve mardi à dix heures et quart", []string{"datetime[mardi a dix heures et quart] wd2 10:15 either"}},
		{"je règle les quatre-vingts euros", []string{"amount[quatre-vingts euros] 80 EUR"}},
	})
}

func TestValuesPortuguese(t *testing.T) {
	checkValues(t, "pt", []valueCase{
		{"cento e vinte reais e cinquenta centavos", []string{"amount[cento e vinte reais e cinquenta centavos] 120.50 BRL"}},
		{"Quer que eu pague R$ 120,50?", []string{"amount[r$ 120,50] 120.50 BRL"}},
		{"cento e vinte", []string{"number[cento e vinte] 120"}},
		{"vinte e um", []string{"number[vinte e um] 21"}},
		{"um real", []string{"amount[um real] 1 BRL"}},
		{"terça-feira, 8 de dezembro, às 15h", []string{"datetime[terca-feira, 8 de dezembro, as 15h] m12 d8 wd2 15:00"}},
		{"Posso agendar para sexta às 9h?", []string{"datetime[sexta as 9h] wd5 09:00 either"}},
		{"Agendo para o dia 8 às nove da manhã?", []string{"datetime[para o dia 8 as nove da manha] d8 09:00"}},
		{"às três da tarde", []string{"time[as tres da tarde] 15:00"}},
		{"três e meia da tarde", []string{"time[tres e meia da tarde] 15:30"}},
		{"quinze para as quatro", []string{"time[quinze para as quatro] 03:45 either"}},
		// "pras" is "para as" as callers and agents say it.
		{"quinze pras quatro", []string{"time[quinze pras quatro] 03:45 either"}},
		{"um quarto pras nove", []string{"time[um quarto pras nove] 08:45 either"}},
		{"ao meio-dia", []string{"time[meio-dia] 12:00"}},
		{"amanhã de manhã", []string{"relative[amanha]"}},
		// "segunda" is a weekday only with "feira"; "uma" alone is an article.
		{"Quer que eu envie a segunda via do boleto?", nil},
		{"na segunda-feira", []string{"date[segunda-feira] wd1"}},
		{"Quer uma cópia?", nil},
		{"Cada um paga.", nil},
		{"setenta e um reais e vinte e cinco centavos", []string{"amount[setenta e um reais e vinte e cinco centavos] 71.25 BRL"}},
		{"sexta-feira, 12 de maio, às 10h30", []string{"datetime[sexta-feira, 12 de maio, as 10h30] m5 d12 wd5 10:30 either"}},
		{"agendo para terça às dez e quinze", []string{"datetime[terca as dez e quinze] wd2 10:15 either"}},
	})
}

func TestValuesItalian(t *testing.T) {
	checkValues(t, "it", []valueCase{
		{"centoventi euro", []string{"amount[centoventi euro] 120 EUR"}},
		{"Pago centoventi euro e cinquanta?", []string{"amount[centoventi euro e cinquanta] 120.50 EUR"}},
		{"duemilacinquecento euro", []string{"amount[duemilacinquecento euro] 2500 EUR"}},
		{"ventuno", []string{"number[ventuno] 21"}},
		{"trentotto", []string{"number[trentotto] 38"}},
		{"centottanta", []string{"number[centottanta] 180"}},
		{"Pago i 45 euro?", []string{"amount[45 euro] 45 EUR"}},
		{"martedì 8 dicembre alle 15", []string{"datetime[martedi 8 dicembre alle 15] m12 d8 wd2 15:00"}},
		{"l'8 dicembre", []string{"date[l'8 dicembre] m12 d8"}},
		{"il primo dicembre", []string{"date[il primo dicembre] m12 d1"}},
		{"alle tre del pomeriggio", []string{"time[alle tre del pomeriggio] 15:00"}},
		{"le quattro meno un quarto", []string{"time[le quattro meno un quarto] 03:45 either"}},
		{"all'una e mezza", []string{"time[all'una e mezza] 01:30 either"}},
		{"Prenoto per le venti e trenta?", []string{"time[per le venti e trenta] 20:30"}},
		{"domani alle 9", []string{"relative[domani]", "time[alle 9] 09:00 either"}},
		// Articles alone are not numbers.
		{"Vuole un appuntamento?", nil},
		{"Le mando una copia?", nil},
		{"Prenoto un tavolo per due?", []string{"number[due] 2"}},
		{"settantuno euro e venticinque", []string{"amount[settantuno euro e venticinque] 71.25 EUR"}},
		{"venerdì 12 maggio alle 10:30", []string{"datetime[venerdi 12 maggio alle 10:30] m5 d12 wd5 10:30 either"}},
		{"prenoto per martedì alle dieci e un quarto", []string{"datetime[martedi alle dieci e un quarto] wd2 10:15 either"}},
		{"Le prenoto un tavolo per le 20?", []string{"time[per le 20] 20:00"}},
	})
}

func TestValuesDutch(t *testing.T) {
	checkValues(t, "nl", []valueCase{
		{"honderdtwintig euro", []string{"amount[honderdtwintig euro] 120 EUR"}},
		{"Zal ik € 120,50 betalen?", []string{"amount[€ 120,50] 120.50 EUR"}},
		{"eenentwintig", []string{"number[eenentwintig] 21"}},
		{"tweeëntwintig", []string{"number[tweeentwintig] 22"}},
		{"een euro vijftig", []string{"amount[een euro vijftig] 1.50 EUR"}},
		{"half vier", []string{"time[half vier] 03:30 either"}},
		{"kwart over drie", []string{"time[kwart over drie] 03:15 either"}},
		{"tien over half vier", []string{"time[tien over half vier] 03:40 either"}},
		{"Zal ik het om kwart voor twaalf boeken?", []string{"time[om kwart voor twaalf] 11:45 either"}},
		{"op de achtste", []string{"date[op de achtste] d8"}},
		{"dinsdag 8 december om 15.00 uur", []string{"datetime[dinsdag 8 december om 15.00 uur] m12 d8 wd2 15:00"}},
		{"om 3 uur 's middags", []string{"time[om 3 uur 's middags] 15:00"}},
		{"morgen om 10 uur", []string{"relative[morgen]", "time[om 10 uur] 10:00 either"}},
		// "een" alone is the article.
		{"Zal ik een tafel reserveren voor vier personen?", []string{"number[vier] 4"}},
		{"eenenzeventig euro vijfentwintig", []string{"amount[eenenzeventig euro vijfentwintig] 71.25 EUR"}},
		{"Zal ik u inplannen voor woensdag 14 mei om 9 uur?", []string{"datetime[woensdag 14 mei om 9 uur] m5 d14 wd3 09:00 either"}},
		{"om half elf", []string{"time[om half elf] 10:30 either"}},
		{"Nog een koffie?", nil},
		{"Goede morgen, zal ik het boeken?", nil},
	})
}

func TestParseArg(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want Arg
		ok   bool
	}{
		{71.25, Arg{Kind: ArgNumber, Units: 7125, Scale: 2}, true},
		{sum(0.1, 0.2), Arg{Kind: ArgNumber, Units: 30000000000000004, Scale: 17}, true},
		{float64(45), Arg{Kind: ArgNumber, Units: 45}, true},
		{-3.5, Arg{Kind: ArgNumber, Units: -35, Scale: 1}, true},
		{"71.25", Arg{Kind: ArgNumber, Units: 7125, Scale: 2}, true},
		{"$71.25", Arg{Kind: ArgNumber, Units: 7125, Scale: 2}, true},
		{"USD 71.25", Arg{Kind: ArgNumber, Units: 7125, Scale: 2, Currency: "USD"}, true},
		{"71,25 €", Arg{Kind: ArgNumber, Units: 7125, Scale: 2, Currency: "EUR"}, true},
		{"R$ 120,50", Arg{Kind: ArgNumber, Units: 12050, Scale: 2, Currency: "BRL"}, true},
		{"89,90", Arg{Kind: ArgNumber, Units: 8990, Scale: 2}, true},
		{"1,200.50", Arg{Kind: ArgNumber, Units: 120050, Scale: 2}, true},
		{"1.200,50", Arg{Kind: ArgNumber, Units: 120050, Scale: 2}, true},
		{"2026-12-08", Arg{Kind: ArgDate, Year: 2026, Month: 12, Day: 8}, true},
		{"2026-12-08T15:00", Arg{Kind: ArgDateTime, Year: 2026, Month: 12, Day: 8, Minutes: 900}, true},
		{"2026-12-08T15:00:00Z", Arg{Kind: ArgDateTime, Year: 2026, Month: 12, Day: 8, Minutes: 900}, true},
		{"2026-12-08 15:00:00.000+01:00", Arg{Kind: ArgDateTime, Year: 2026, Month: 12, Day: 8, Minutes: 900}, true},
		{"2026-12-08T15:00:30", Arg{Kind: ArgDateTime, Year: 2026, Month: 12, Day: 8, Minutes: 900, Seconds: 30}, true},
		{"15:00", Arg{Kind: ArgTime, Minutes: 900}, true},
		{"9:45", Arg{Kind: ArgTime, Minutes: 585}, true},
		{"3:00 PM", Arg{Kind: ArgTime, Minutes: 900}, true},
		{"12 AM", Arg{Kind: ArgTime, Minutes: 0}, true},
		{"12pm", Arg{Kind: ArgTime, Minutes: 720}, true},
		{"USD", Arg{Kind: ArgCurrency, Currency: "USD"}, true},
		// Not values, or not without guessing.
		{"usd", Arg{}, false},
		{"ABC", Arg{}, false},
		{"D E", Arg{}, false},
		{"1,200", Arg{}, false},
		{"1.200", Arg{}, false},
		{"A-17", Arg{}, false},
		{"W-2291", Arg{}, false},
		{"2026-02-30", Arg{}, false},
		{"25:00", Arg{}, false},
		{"13 PM", Arg{}, false},
		{"appeal", Arg{}, false},
		{true, Arg{}, false},
		{nil, Arg{}, false},
		{math.NaN(), Arg{}, false},
		{math.Inf(1), Arg{}, false},
		{1e30, Arg{}, false},
	} {
		got, ok := ParseArg(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseArg(%#v) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// oneValue reads the single value of text.
func oneValue(t *testing.T, l *Locale, text string) Value {
	t.Helper()
	var vs []Value
	for _, s := range l.Parse(text).Sentences {
		vs = append(vs, l.Values(s)...)
	}
	if len(vs) != 1 {
		t.Fatalf("%s %q: %d values, want 1", l.Lang(), text, len(vs))
	}
	return vs[0]
}

// sum adds at run time, as a model's arithmetic does: 0.1+0.2 is not 0.3.
func sum(a, b float64) float64 { return a + b }

func arg(t *testing.T, v any) Arg {
	t.Helper()
	a, ok := ParseArg(v)
	if !ok {
		t.Fatalf("ParseArg(%#v) failed", v)
	}
	return a
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		lang, text string
		arg        any
		matches    bool
		agrees     bool
	}{
		// Exact, in minor units.
		{"en", "$71.25", 71.25, true, true},
		{"en", "$71.25", 71.2, false, false},
		{"en", "$71.25", 71.250001, false, false},
		{"en", "$71.20", 71.2, true, true},
		{"en", "0.3", sum(0.1, 0.2), false, false},
		{"en", "seventy-one dollars and twenty-five cents", "$71.25", true, true},
		{"en", "71.25 euros", "USD 71.25", false, false},
		{"es", "ciento veinte con cincuenta", 120.5, true, true},
		{"de", "hundertzwanzig Euro fünfzig", "120,50", true, true},
		{"en", "seventy-one twenty-five", 71.25, false, false},
		// Dates: every stated part agrees; a day must be stated to state one.
		{"en", "Tuesday the 8th", "2026-12-08", true, true},
		{"en", "Monday the 8th", "2026-12-08", false, false},
		{"en", "Tuesday the 8th", "2026-12-09", false, false},
		{"en", "December 8", "2026-12-08", true, true},
		{"en", "November 8", "2026-12-08", false, false},
		{"en", "Tuesday", "2026-12-08", false, true},
		{"en", "Tuesday", "2026-12-09", false, false},
		{"en", "12/08/2026", "2026-12-08", false, false},
		{"en", "12/25/2026", "2026-12-25", true, true},
		{"de", "am Dienstag, den 8. Dezember", "2026-12-08", true, true},
		{"nl", "op de achtste", "2026-12-08", true, true},
		{"en", "tomorrow", "2026-12-08", false, false},
		// A date does not state a date-time, but agrees with it.
		{"en", "Tuesday the 8th", "2026-12-08T15:00", false, true},
		// Times.
		{"en", "3 pm", "15:00", true, true},
		{"en", "3 pm", "03:00", false, false},
		{"en", "at 3", "15:00", true, true},
		{"en", "at 3", "03:00", true, true},
		{"en", "at 3", "15:30", false, false},
		{"en", "15:00", "15:00:30", false, false},
		{"es", "las tres de la tarde", "15:00", true, true},
		{"de", "halb vier", "15:30", true, true},
		{"nl", "half vier", "03:30", true, true},
		{"en", "three in the afternoon", "2026-12-08T15:00", false, true},
		// Date-times.
		{"en", "Tuesday, December 8 at 3 pm", "2026-12-08T15:00:00", true, true},
		{"en", "Tuesday, December 8 at 3 pm", "2026-12-08T16:00:00", false, false},
		{"en", "Tuesday, December 8 at 3 pm", "15:00", true, false},
	} {
		l := locale(t, tc.lang)
		v := oneValue(t, l, tc.text)
		a := arg(t, tc.arg)
		if got := v.Matches(a); got != tc.matches {
			t.Errorf("%s %q Matches(%v) = %v", tc.lang, tc.text, tc.arg, got)
		}
		if got := v.Agrees(a); got != tc.agrees {
			t.Errorf("%s %q Agrees(%v) = %v", tc.lang, tc.text, tc.arg, got)
		}
	}
}

func TestMatchArgs(t *testing.T) {
	for _, tc := range []struct {
		name, lang, text string
		args             []any
		stated, stray    uint64
	}{
		{"the nine o'clock slot does not book 9:45", "en", "Shall I book the nine o'clock slot?", []any{"09:45"}, 0, 1},
		{"the nine o'clock slot books 9:00", "en", "Shall I book the nine o'clock slot?", []any{"09:00"}, 1, 0},
		{"two sums, one argument", "en", "Your bill is $64.00 and the new total is $71.25, shall I pay it?", []any{71.25}, 1, 1},
		{"two sums, two arguments", "en", "Shall I pay $64.00 now and $71.25 later?", []any{64.0, 71.25}, 3, 0},
		{"at 3 with both readings among the arguments", "en", "Shall I book it at 3?", []any{"03:00", "15:00"}, 0, 1},
		{"at 3 with one reading", "en", "Shall I book it at 3?", []any{"15:00"}, 1, 0},
		{"a date and a time said apart state a date-time", "en", "On Tuesday the 8th, shall I book you in at 3 pm?", []any{"2026-12-08T15:00"}, 1, 0},
		{"a weekday and a time agree but do not state it", "de", "Soll ich den Termin am Donnerstag um 14:30 Uhr eintragen?", []any{"2025-05-15T14:30"}, 0, 0},
		{"the wrong weekday is stray", "de", "Soll ich den Termin am Freitag um 14:30 Uhr eintragen?", []any{"2025-05-15T14:30"}, 0, 1},
		{"a date and a time argument", "es", "¿Le reservo el martes 8 de diciembre a las tres de la tarde?", []any{"2026-12-08", "15:00"}, 3, 0},
		{"relative dates are stray", "en", "Shall I book it for tomorrow at 3 pm?", []any{"2026-12-08T15:00"}, 0, 1},
		{"unclear amounts are stray", "en", "Shall I charge seventy-one twenty-five?", []any{71.25}, 0, 1},
		{"a number no argument holds", "en", "Shall I book 2 tickets?", []any{"2026-12-08"}, 0, 1},
		{"a quantity argument", "en", "Shall I book 2 tickets?", []any{2.0}, 1, 0},
		{"the call's currency", "en", "Shall I pay $71.25?", []any{71.25, "USD"}, 3, 0},
		{"another currency", "en", "Shall I pay 71.25 euros?", []any{71.25, "USD"}, 0, 1},
		{"no currency said", "en", "Shall I pay 71.25?", []any{71.25, "USD"}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := locale(t, tc.lang)
			var vals []Value
			for _, s := range l.Parse(tc.text).Sentences {
				vals = append(vals, l.Values(s)...)
			}
			var args []Arg
			for _, a := range tc.args {
				args = append(args, arg(t, a))
			}
			got := MatchArgs(vals, args)
			if got.Stated != tc.stated || got.Stray != tc.stray {
				var shown []string
				for _, v := range vals {
					shown = append(shown, show(v))
				}
				t.Errorf("MatchArgs(%q, %v) = %+v, want stated %b stray %b", shown, tc.args, got, tc.stated, tc.stray)
			}
		})
	}
}

func TestValuesValidation(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"bad multiplier", "values:\n  numbers:\n    multipliers: {dozen: 12}\n  date_order: [dmy]\n", "values.numbers.multipliers"},
		{"month out of range", "values:\n  months: {smarch: 13}\n  date_order: [dmy]\n", "values.months"},
		{"no date order", "values:\n  months: {jan: 1}\n", "values.date_order"},
		{"bad date order", "values:\n  date_order: [ymd]\n", "values.date_order[0]"},
		{"bad currency code", "values:\n  currencies: {dollar: [\"$\"]}\n", "values.currencies"},
		{"bad period", "values:\n  periods: {pm: [24, 12]}\n", "values.periods"},
		{"clock phrase without hour", "values:\n  clock_phrases: {\"half past\": 30}\n", "values.clock_phrases"},
		{"slot of an unknown word", "values:\n  numbers:\n    slots: {dix: 10}\n", "values.numbers.slots"},
		{"repeated relative", "values:\n  relative: [today, Today]\n", "values.relative[1]"},
	} {
		_, err := ParseLocale("xx", []byte(minimalLocale+tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	// A locale without a values block reads figures only.
	l, err := ParseLocale("xx", []byte(minimalLocale))
	if err != nil {
		t.Fatal(err)
	}
	if got := valuesOf(l, "zahle 71,25 heute"); strings.Join(got, ";") != "number[71,25] 71.25" {
		t.Errorf("figures without a values block: %q", got)
	}
}

// TestValuesAllocations: a sentence with no value costs nothing; one with
// values costs the slice they are appended to.
func TestValuesAllocations(t *testing.T) {
	for lang, text := range map[string]string{
		"en": "Would you like me to go ahead and submit the appeal for you now?",
		"de": "Möchten Sie, dass ich den Widerspruch jetzt für Sie einreiche?",
		"es": "¿Quiere que le envíe la apelación ahora mismo?",
	} {
		l := locale(t, lang)
		s := l.Parse(text).Sentences[0]
		if n := testing.AllocsPerRun(100, func() { l.Values(s) }); n != 0 {
			t.Errorf("%s: %v allocations for a sentence with no value", lang, n)
		}
	}
	l := locale(t, "en")
	s := l.Parse("Shall I pay the $71.25 on Tuesday, December 8 at 3 pm?").Sentences[0]
	buf := make([]Value, 0, 4)
	if n := testing.AllocsPerRun(100, func() { buf = l.AppendValues(buf[:0], s) }); n != 0 {
		t.Errorf("%v allocations appending to a buffer", n)
	}
	if len(buf) != 2 {
		t.Errorf("values = %d, want 2", len(buf))
	}
}

func TestValuesSpans(t *testing.T) {
	l := locale(t, "en")
	s := l.Parse("So that's $64.00 last month, and for Tuesday the 8th at 3 pm it is seventy-one dollars.").Sentences[0]
	vs := l.Values(s)
	want := [][2]int{{2, 3}, {7, 14}, {16, 19}}
	if len(vs) != len(want) {
		t.Fatalf("values = %d", len(vs))
	}
	for k, v := range vs {
		if v.Start != want[k][0] || v.End != want[k][1] {
			t.Errorf("value %d %s: span [%d, %d), want %v", k, show(v), v.Start, v.End, want[k])
		}
	}
	// A Sentence that is not Raw's text (built by hand) is still read,
	// from its tokens alone.
	hand := Sentence{Tokens: []string{"pay", "seventy", "one", "dollars"}}
	if got := l.Values(hand); len(got) != 1 || got[0].Units != 71 || got[0].Text != "seventy one dollars" {
		t.Errorf("hand-built sentence: %+v", got)
	}
}

// BenchmarkValues times Values on a question with no value and on one
// with an amount and a date; parse times the tokeniser on the second, the
// work the judge already does, for scale on a noisy machine.
func BenchmarkValues(b *testing.B) {
	l := locale(b, "en")
	const withValues = "Shall I pay the $71.25 on Tuesday, December 8?"
	for _, bc := range []struct{ name, text string }{
		{"none", "Would you like me to go ahead and submit the appeal for you now?"},
		{"amount_date", withValues},
	} {
		s := l.Parse(bc.text).Sentences[0]
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l.Values(s)
			}
		})
	}
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l.Parse(withValues)
		}
	})
}

// TestParseNumberFigures: figures read as ParseFloat reads their decimal
// form, without allocating.
func TestParseNumberFigures(t *testing.T) {
	for lang, cases := range map[string]map[string]string{
		"en": {"120.50": "120.50", "0.1": "0.1", "1,200.50": "1200.50", "3.14159": "3.14159", "71.25": "71.25", "1,200,000": "1200000"},
		"de": {"120,50": "120.50", "1.200,50": "1200.50", "0,3": "0.3", "1.200": "1200"},
	} {
		l := locale(t, lang)
		for in, dec := range cases {
			want, _ := strconv.ParseFloat(dec, 64)
			if got, ok := l.ParseNumber(in); !ok || got != want {
				t.Errorf("%s ParseNumber(%q) = %v, %v; want %v", lang, in, got, ok, want)
			}
			if n := testing.AllocsPerRun(20, func() { l.ParseNumber(in) }); n != 0 {
				t.Errorf("%s ParseNumber(%q): %v allocations", lang, in, n)
			}
		}
	}
}

func TestParseNumberWords(t *testing.T) {
	for _, tc := range []struct {
		lang, tok string
		want      float64
		ok        bool
	}{
		{"en", "two", 2, true}, {"en", "sixty", 60, true}, {"en", "a", 0, false}, {"en", "first", 0, false},
		{"de", "einundzwanzig", 21, true}, {"de", "eins", 1, true}, {"de", "einen", 0, false}, {"de", "achten", 0, false},
		{"nl", "eenentwintig", 21, true}, {"nl", "een", 0, false}, {"it", "centoventi", 120, true},
		{"fr", "un", 0, false}, {"es", "una", 0, false}, {"pt", "uma", 0, false}, {"es", "veintiuno", 21, true},
	} {
		l := locale(t, tc.lang)
		got, ok := l.ParseNumber(tc.tok)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s ParseNumber(%q) = %v, %v; want %v, %v", tc.lang, tc.tok, got, ok, tc.want, tc.ok)
		}
		if n := testing.AllocsPerRun(50, func() { l.ParseNumber(tc.tok) }); n != 0 {
			t.Errorf("%s ParseNumber(%q): %v allocations", tc.lang, tc.tok, n)
		}
	}
}

// FuzzValues: reading never panics; values are in order, inside the
// sentence and apart; and a value written from an argument's own text
// form states that argument.
func FuzzValues(f *testing.F) {
	set, err := LoadEmbedded()
	if err != nil {
		f.Fatal(err)
	}
	langs := set.Langs()
	for _, seed := range []string{
		"Shall I pay the $71.25 on Tuesday, December 8 at 3 pm?", "ciento veinte con cincuenta", "am 08.12.2026 um 9:45 Uhr",
		"quatre-vingt-dix-sept", "R$ 1.200,50", "tien over half vier", "centottanta", "12/08", "2026-12-08", "at 3", "1 200,50 €",
		"seventy-one twenty-five", "um halb vier", "le 1er décembre", "geht's am 3.", "twenty dollars and", "con", "point five",
		"quarter to", "half", "a las", "00:00:00", "99999999999999999999", "9.9.9", "1/2/3/4",
	} {
		f.Add(seed, 0.0, uint8(0))
	}
	f.Add("", 71.25, uint8(1))
	f.Add("", 1200.5, uint8(3))
	f.Fuzz(func(t *testing.T, text string, num float64, k uint8) {
		l := set.Get(langs[int(k)%len(langs)])
		for _, s := range l.Parse(text).Sentences {
			prev := 0
			for _, v := range l.Values(s) {
				if v.Start < prev || v.End <= v.Start || v.End > len(s.Tokens) {
					t.Fatalf("%q: value %s at [%d, %d) after %d of %d tokens", text, show(v), v.Start, v.End, prev, len(s.Tokens))
				}
				if v.Kind < ValueNumber || v.Kind > ValueUnclear || v.Text == "" {
					t.Fatalf("%q: bad value %+v", text, v)
				}
				prev = v.End
				for _, a := range []any{num, text} {
					if pa, ok := ParseArg(a); ok {
						v.Matches(pa)
						v.Agrees(pa)
					}
				}
			}
		}
		// A value written from an argument's own text form matches it:
		// an ISO date, a time, and the number in the locale's figures.
		bits := math.Float64bits(num)
		y, mo, d := 2000+int(bits%100), 1+int(bits>>8%12), 1+int(bits>>16%28)
		hh, mm := int(bits>>24%24), int(bits>>32%60)
		for _, form := range []struct{ text, arg string }{
			{fmt.Sprintf("%04d-%02d-%02d", y, mo, d), fmt.Sprintf("%04d-%02d-%02d", y, mo, d)},
			{fmt.Sprintf("%02d:%02d", hh, mm), fmt.Sprintf("%02d:%02d", hh, mm)},
		} {
			a := arg(t, form.arg)
			for _, s := range l.Parse("x " + form.text + " x").Sentences {
				if vs := l.Values(s); len(vs) != 1 || !vs[0].Matches(a) || MatchArgs(vs, []Arg{a}).Stated != 1 {
					t.Fatalf("%s: %q read as %v, not matching %+v", l.Lang(), form.text, vs, a)
				}
			}
		}
		if math.IsNaN(num) || math.IsInf(num, 0) || num < 0 || num > 1e12 {
			return
		}
		a, ok := ParseArg(num)
		if !ok || a.Scale > 6 {
			return
		}
		figure := decimalString(a.Units, a.Scale)
		if l.decimalComma {
			figure = strings.Replace(figure, ".", ",", 1)
		}
		for _, s := range l.Parse("x " + figure + " x").Sentences {
			vs := l.Values(s)
			if len(vs) != 1 || !vs[0].Matches(a) {
				t.Fatalf("%s: %q read as %v, not matching %+v", l.Lang(), figure, vs, a)
			}
		}
	})
}

// FuzzParseArg: an argument's string never panics ParseArg, and a date,
// time or date-time it reads, written back, reads the same.
func FuzzParseArg(f *testing.F) {
	for _, s := range []string{"71.25", "$71.25", "2026-12-08", "2026-12-08T15:00:00Z", "3:00 PM", "15:00", "1,200", "USD 7", "2026-13-40", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseArg(s)
		if !ok {
			return
		}
		var back string
		switch a.Kind {
		case ArgDate:
			back = fmt.Sprintf("%04d-%02d-%02d", a.Year, a.Month, a.Day)
		case ArgTime:
			back = fmt.Sprintf("%02d:%02d:%02d", a.Minutes/60, a.Minutes%60, a.Seconds)
		case ArgDateTime:
			back = fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", a.Year, a.Month, a.Day, a.Minutes/60, a.Minutes%60, a.Seconds)
		default:
			return
		}
		if b, ok := ParseArg(back); !ok || b != a {
			t.Fatalf("ParseArg(%q) = %+v; written back %q reads %+v, %v", s, a, back, b, ok)
		}
	})
}

// TestValuesArticles: an article is 1 only inside a number, before a
// multiplier or before a currency.
func TestValuesArticles(t *testing.T) {
	for _, tc := range []struct {
		lang, text string
		want       []string
	}{
		{"en", "Shall I send a copy?", nil},
		{"en", "a hundred", []string{"number[a hundred] 100"}},
		{"en", "an hour", nil},
		{"es", "¿Le mando una copia?", nil},
		{"es", "¿Le reservo a la una?", []string{"time[a la una] 01:00 either"}},
		{"es", "un millón de pesos", []string{"amount[un millon de pesos] 1000000"}},
		{"fr", "deux millions d'euros", []string{"amount[deux millions d'euros] 2000000 EUR"}},
		{"es", "ocho de diciembre", []string{"date[ocho de diciembre] m12 d8"}},
		{"de", "Soll ich einen Termin buchen?", nil},
		{"de", "eine Million Euro", []string{"amount[eine million euro] 1000000 EUR"}},
		{"de", "Soll ich Ihnen ein Taxi rufen?", nil},
		{"fr", "Je vous prends un rendez-vous ?", nil},
		{"fr", "un million", []string{"number[un million] 1000000"}},
		{"fr", "trente et une", []string{"number[trente et une] 31"}},
		{"pt", "Quer que eu gere um boleto?", nil},
		{"pt", "cento e um", []string{"number[cento e um] 101"}},
		{"it", "Le fisso un appuntamento?", nil},
		{"it", "un euro", []string{"amount[un euro] 1 EUR"}},
		{"nl", "Zal ik een afspraak maken?", nil},
		{"nl", "een euro", []string{"amount[een euro] 1 EUR"}},
		{"nl", "honderdeen", []string{"number[honderdeen] 101"}},
	} {
		got := valuesOf(locale(t, tc.lang), tc.text)
		if strings.Join(got, " ; ") != strings.Join(tc.want, " ; ") {
			t.Errorf("%s %q: got %q, want %q", tc.lang, tc.text, got, tc.want)
		}
	}
}

// TestValuesEveryLanguage: the brief's list, in each language: numbers up
// to 999,999, codes before figures, words for hundredths, parts of the
// day, dollars by name.
func TestValuesEveryLanguage(t *testing.T) {
	for _, tc := range []struct {
		lang, text string
		want       []string
	}{
		{"es", "novecientos noventa y nueve mil novecientos noventa y nueve", []string{"number[novecientos noventa y nueve mil novecientos noventa y nueve] 999999"}},
		{"fr", "neuf cent quatre-vingt-dix-neuf mille neuf cent quatre-vingt-dix-neuf", []string{"number[neuf cent quatre-vingt-dix-neuf mille neuf cent quatre-vingt-dix-neuf] 999999"}},
		{"it", "novecentonovantanovemilanovecentonovantanove", []string{"number[novecentonovantanovemilanovecentonovantanove] 999999"}},
		{"pt", "novecentos e noventa e nove mil novecentos e noventa e nove", []string{"number[novecentos e noventa e nove mil novecentos e noventa e nove] 999999"}},
		{"nl", "negenhonderdnegenennegentigduizendnegenhonderdnegenennegentig", []string{"number[negenhonderdnegenennegentigduizendnegenhonderdnegenennegentig] 999999"}},
		{"es", "¿Pago EUR 71,25?", []string{"amount[eur 71,25] 71.25 EUR"}},
		{"de", "Soll ich EUR 71,25 überweisen?", []string{"amount[eur 71,25] 71.25 EUR"}},
		{"de", "fünfzig Cent", []string{"amount[funfzig cent] 0.50"}},
		{"fr", "cinquante centimes", []string{"amount[cinquante centimes] 0.50"}},
		{"it", "cinquanta centesimi", []string{"amount[cinquanta centesimi] 0.50"}},
		{"es", "cincuenta céntimos", []string{"amount[cincuenta centimos] 0.50"}},
		{"pt", "cinquenta centavos", []string{"amount[cinquenta centavos] 0.50"}},
		{"nl", "vijftig cent", []string{"amount[vijftig cent] 0.50"}},
		{"fr", "Je le mets le 8 ?", []string{"date[le 8] d8"}},
		{"fr", "mille deux cents euros", []string{"amount[mille deux cents euros] 1200 EUR"}},
		{"es", "un millón doscientos mil", []string{"number[un millon doscientos mil] 1200000"}},
		{"de", "zwölfhundert Euro", []string{"amount[zwolfhundert euro] 1200 EUR"}},
		{"de", "Soll ich Ihnen den Betrag von hundertneunzehn Euro neunundneunzig abbuchen?", []string{"amount[hundertneunzehn euro neunundneunzig] 119.99 EUR"}},
		{"en", "twenty-five thousand", []string{"number[twenty-five thousand] 25000"}},
		{"en", "a thousand and one", []string{"number[a thousand and one] 1001"}},
		{"en", "one million two hundred thousand", []string{"number[one million two hundred thousand] 1200000"}},
		{"it", "milleduecento euro", []string{"amount[milleduecento euro] 1200 EUR"}},
		{"nl", "duizend tweehonderd euro", []string{"amount[duizend tweehonderd euro] 1200 EUR"}},
		{"nl", "twaalfhonderd euro", []string{"amount[twaalfhonderd euro] 1200 EUR"}},
		{"pt", "mil e duzentos reais", []string{"amount[mil e duzentos reais] 1200 BRL"}},
		{"es", "¿Le reservo a las tres de la madrugada?", []string{"time[a las tres de la madrugada] 03:00"}},
		{"de", "um drei Uhr früh", []string{"time[um drei uhr fruh] 03:00"}},
		{"fr", "à neuf heures du matin", []string{"time[a neuf heures du matin] 09:00"}},
		{"it", "alle nove di sera", []string{"time[alle nove di sera] 21:00"}},
		{"pt", "às nove da noite", []string{"time[as nove da noite] 21:00"}},
		{"nl", "om negen uur 's avonds", []string{"time[om negen uur 's avonds] 21:00"}},
		{"en", "at 7 in the morning", []string{"time[at 7 in the morning] 07:00"}},
		{"es", "¿Le cargo 45 dólares?", []string{"amount[45 dolares] 45 USD"}},
		{"de", "Soll ich die 45 Dollar abbuchen?", []string{"amount[45 dollar] 45 USD"}},
		{"fr", "Je débite 45 dollars ?", []string{"amount[45 dollars] 45 USD"}},
		{"en", "Shall I charge 45 bucks?", []string{"amount[45 bucks] 45 USD"}},
		{"pt", "Posso cobrar 45 dólares?", []string{"amount[45 dolares] 45 USD"}},
		{"it", "Addebito 45 dollari?", []string{"amount[45 dollari] 45 USD"}},
		{"nl", "Zal ik 45 dollar afschrijven?", []string{"amount[45 dollar] 45 USD"}},
	} {
		got := valuesOf(locale(t, tc.lang), tc.text)
		if strings.Join(got, " ; ") != strings.Join(tc.want, " ; ") {
			t.Errorf("%s %q: got %q, want %q", tc.lang, tc.text, got, tc.want)
		}
	}
}
