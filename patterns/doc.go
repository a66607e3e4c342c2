// Package patterns holds the language rules the guard judges turns with,
// read from locale files (locales/<lang>.yaml, embedded in the binary and
// overridable from a directory). It knows words, not calls: it folds and
// tokenises text, finds a plain yes, a negation, a hedge or a condition in a
// caller's turn, finds the question in an agent's turn, and reads whether
// that question plainly asks leave for one action. It reads the amounts,
// dates and times a sentence states (Locale.Values) and matches them
// exactly against a tool call's arguments (ParseArg, MatchArgs).
//
// Judge is the judgement of a yes, rules 3 to 6 of the README in one
// function of the turns, the tool (as the policy and locale compile it,
// Locale.CompileTool) and the call's arguments: the caller's answer (rule 3), the
// agent's question (rule 4), the question about this action and plain
// (rule 5), or the caller's own instruction (rule 6). It returns an
// Outcome, the evidence matched and a detail; the guard maps outcomes to
// reasons.
//
// The files hold one concern each: locale.go (loading and checking a
// locale), text.go (folding and tokens), phrase.go (phrases and their
// matching), forms.go (word forms: inflection, a tool's verbs and
// objects), answer.go (the caller's answer), question.go (the agent's
// question and the reading of its words), structure.go (the action's
// slot, the free words and the operators), reference.go (what a
// question is about and what it points back to), bound.go (the call's
// values in a sentence), ask.go (the plain question a refusal suggests),
// judge.go (Judge), values*.go (the values reader).
//
// Rules that hold:
//   - Text is compared folded: lower case, accents removed, curly quotes
//     straightened, elisions split ("j'envoie" is "j'" "envoie").
//   - A negation word refuses wherever it stands unless a listed idiom
//     ("no problem") covers it.
//   - A question is plain when its structure is explained and it holds
//     no operator (structure.go): the action's slot (the frame's tail, the
//     verb and what it governs, the words modifying the action's noun) is
//     explained word by word, and a word no list explains there refuses;
//     every other word is free, but an operator of the locale's closed
//     classes (negation, alternative, condition, deferral, embedding,
//     purpose, retraction, hedge, action changer, addition), another
//     tool's verb or object, or a conjunction opening a second clause
//     refuses wherever it stands.
//   - Every value the agent's turn states for an argument of the call is
//     the call's, unless the question picks one of two (bound.go).
//   - Judging never fails: text the rules do not understand is judged not
//     plain, so the guard refuses.
//   - Values are read, never guessed: an amount, date or time the reader
//     cannot read exactly, and a relative date, match no argument.
//   - A loaded Set is immutable and safe for concurrent use.
package patterns
