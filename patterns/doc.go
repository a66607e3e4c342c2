// Package patterns holds the language rules the guard judges turns with,
// read from locale files (locales/<lang>.yaml, embedded in the binary and
// overridable from a directory). It knows words, not calls: it folds and
// tokenises text, finds a plain yes, a negation, a hedge or a condition in a
// caller's turn, finds the question in an agent's turn, and tells whether a
// sentence names an action. It reads the amounts, dates and times a
// sentence states (Locale.Values) and matches them exactly against a tool
// call's arguments (ParseArg, MatchArgs).
//
// Rules that hold:
//   - Text is compared folded: lower case, accents removed, curly quotes
//     straightened, elisions split ("j'envoie" is "j'" "envoie").
//   - A negation word refuses wherever it stands unless a listed idiom
//     ("no problem") covers it.
//   - Judging never fails: text the rules do not understand is judged not
//     plain, so the guard refuses.
//   - Values are read, never guessed: an amount, date or time the reader
//     cannot read exactly, and a relative date, match no argument.
//   - A loaded Set is immutable and safe for concurrent use.
package patterns
