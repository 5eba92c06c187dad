package store

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
)

// SecretPrefix starts every key secret.
const SecretPrefix = "mdk_live_"

// Secret layout after SecretPrefix: secretRandomLen random characters, then
// secretChecksumLen characters of checksum over the prefix and the random
// part. The checksum lets a mistyped or truncated key be refused without a
// lookup, and lets a secret scanner tell a real key from 43 random
// characters (random text passes once in 64^6 = 2^36).
const (
	secretBodyLen     = 43
	secretChecksumLen = 6
	secretRandomLen   = secretBodyLen - secretChecksumLen
	secretLen         = len(SecretPrefix) + secretBodyLen
	secretHeadLen     = len(SecretPrefix) + secretRandomLen
)

// base62 encodes the checksum. Its characters are a subset of the secret's
// alphabet, so a checksum never contains '-' or '_' and a scanner can match
// the tail as [0-9A-Za-z]{6}.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Reasons CheckSecret refuses a secret. ErrSecretChecksum means the secret
// has the shape of a key but was mistyped or altered; ErrSecretMalformed
// means it does not even have the shape.
var (
	ErrSecretMalformed = errors.New("malformed key secret")
	ErrSecretChecksum  = errors.New("key secret checksum does not match: the key was mistyped or truncated")
)

// CheckSecret says why s is not a key secret, or nil when it is one: the
// prefix, exactly 43 characters of [A-Za-z0-9_-], the last 6 of them the
// checksum of the first 37 (contract §2). It never reads a database and never
// puts any of s into its error (errors reach logs and clients), only
// lengths and positions.
func CheckSecret(s string) error {
	if len(s) < len(SecretPrefix) || s[:len(SecretPrefix)] != SecretPrefix {
		return fmt.Errorf("%w: it does not start with %s", ErrSecretMalformed, SecretPrefix)
	}
	if n := len(s) - len(SecretPrefix); n != secretBodyLen {
		return fmt.Errorf("%w: %d characters follow %s, not %d (truncated, or extra characters)", ErrSecretMalformed, n, SecretPrefix, secretBodyLen)
	}
	for i := len(SecretPrefix); i < len(s); i++ {
		if !inSecretAlphabet(s[i]) {
			return fmt.Errorf("%w: character %d after %s is not one of [A-Za-z0-9_-]", ErrSecretMalformed, i-len(SecretPrefix)+1, SecretPrefix)
		}
	}
	want := secretChecksum(s[len(SecretPrefix):secretHeadLen])
	if string(want[:]) != s[secretHeadLen:] {
		return ErrSecretChecksum
	}
	return nil
}

// ValidSecret reports whether s is a key secret with a matching checksum.
func ValidSecret(s string) bool { return CheckSecret(s) == nil }

// NewSecret returns a fresh secret: the prefix, 37 base64url characters
// (222 random bits) and their 6-character checksum.
func NewSecret() string {
	var b [28]byte // 28 bytes encode to 38 characters; the first 37 carry 6 random bits each
	rand.Read(b[:])
	head := SecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])[:secretRandomLen]
	sum := secretChecksum(head[len(SecretPrefix):])
	return head + string(sum[:])
}

// secretChecksum is the CRC-32 (IEEE, as in zlib and Ethernet) of the 37
// characters after the prefix (head), written as 6 base62 digits, most significant first, padded with
// '0' (62^6 > 2^32, so every CRC fits). CRC-32 detects every change
// confined to 32 consecutive bits, so any one changed character in head is
// always caught; the encoding is one-to-one, so any changed checksum
// character is too.
//
// The CRC is computed byte by byte over the string with the standard table
// rather than by crc32.ChecksumIEEE, which would need head copied to a
// []byte that escapes: this runs on every request, and 37 bytes do not
// need the vectorised path.
func secretChecksum(head string) [secretChecksumLen]byte {
	c := ^uint32(0)
	for i := 0; i < len(head); i++ {
		c = crc32.IEEETable[byte(c)^head[i]] ^ c>>8
	}
	c = ^c
	var out [secretChecksumLen]byte
	for i := secretChecksumLen - 1; i >= 0; i-- {
		out[i] = base62[c%62]
		c /= 62
	}
	return out
}

func inSecretAlphabet(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
