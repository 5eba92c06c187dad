package store

// Match metadata (contract §3 "Match metadata"): how sure the matcher is that
// a venue's event or market is the same thing as ours. A nil *Match is a
// venue the matcher sent no metadata for, which behaves as it did before
// match metadata existed: its quotes count in the best prices, and it passes
// only min_confidence=0.

// Relations a venue's event or market can have to ours.
const (
	// RelationIdentity is the same question.
	RelationIdentity = "identity"
	// RelationComplement is the venue's YES being our NO: its quotes and
	// trades are shown inverted (1 − price).
	RelationComplement = "complement"
	// RelationSubset, RelationSuperset and RelationOverlap are related
	// questions: shown, never part of the best prices or venue=all candles.
	RelationSubset   = "subset"
	RelationSuperset = "superset"
	RelationOverlap  = "overlap"
)

// Relations lists the relations in the contract's order.
var Relations = [...]string{RelationIdentity, RelationComplement, RelationSubset, RelationSuperset, RelationOverlap}

// MaxMatchMethodLen is the longest method text, in characters.
const MaxMatchMethodLen = 32

// Match is the matcher's metadata for one venue's link.
type Match struct {
	Relation   string  `json:"relation"`
	Confidence float64 `json:"confidence"`
	Method     string  `json:"method"`
}

// Matches holds a document's metadata by venue, in Venues order; nil where
// the matcher sent none.
type Matches [4]*Match

// Counts reports whether venue i's quotes and trades count in the market's
// cross-venue figures (best prices, venue=all candles): identity, complement
// and no metadata do; subset, superset and overlap do not.
func (m *Matches) Counts(i int) bool {
	if m == nil || m[i] == nil {
		return true
	}
	r := m[i].Relation
	return r == RelationIdentity || r == RelationComplement
}

// Inverted reports whether venue i's prices are shown as 1 − price.
func (m *Matches) Inverted(i int) bool {
	return m != nil && m[i] != nil && m[i].Relation == RelationComplement
}
