package approval

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
)

// receiptBytes is a receipt's entropy: 128 bits, never guessed.
const receiptBytes = 16

// newReceipt is a fresh redeem's receipt (base64url, no padding) and the
// SHA-256 (hex) of it that the ledger keeps: the ledger never holds a
// receipt, so reading the bucket releases nothing.
func newReceipt() (receipt, hash string) {
	b := make([]byte, receiptBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	receipt = base64.RawURLEncoding.EncodeToString(b)
	return receipt, receiptHash(receipt)
}

func receiptHash(receipt string) string {
	sum := sha256.Sum256([]byte(receipt))
	return hex.EncodeToString(sum[:])
}

// receiptMatches is whether receipt is the one whose hash an entry keeps.
// An entry without a hash (written before receipts) matches nothing: it
// stays redeemed until its TTL, failing closed.
func receiptMatches(receipt, hash string) bool {
	if receipt == "" || hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(receiptHash(receipt)), []byte(hash)) == 1
}
