package feed

import "testing"

func TestSlugify(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"Will the Fed cut rates in March 2027?", 60, "will-the-fed-cut-rates-in-march-2027"},
		{"Lakers vs Celtics: who wins on 2027-01-14?", 60, "lakers-vs-celtics-who-wins-on-2027-01-14"},
		{"Above $95,000", 60, "above-95000"},
		{"80°F or above", 60, "80-f-or-above"},
		{"Will the Netherlands hold a snap election", 20, "will-the-netherlands"},
		{"Will the Netherlands hold a snap election", 19, "will-the"},
		{"?!", 60, "market"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Slugify(tt.in, tt.max); got != tt.want {
				t.Errorf("Slugify(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

func TestTickerCode(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Cut 25 bps", "CUT25BPS"},
		{"Above $95,000", "ABOVE95000"},
		{"Manchester United by 2+", "MANCHESTERUN"},
		{"°", "M"},
	}
	for _, tt := range tests {
		if got := tickerCode(tt.in); got != tt.want {
			t.Errorf("tickerCode(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestClaimAddsSuffixOnCollision(t *testing.T) {
	ids := newVenueIDs(nil)
	long := "KXSERIES-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	tests := []struct{ in, want string }{
		{"KXFEDCUT-27MAR", "KXFEDCUT-27MAR"},
		{"KXFEDCUT-27MAR", "KXFEDCUT-27MAR-2"},
		{"KXFEDCUT-27MAR", "KXFEDCUT-27MAR-3"},
		{long, long[:maxIDLen]},
		{long, long[:maxIDLen-2] + "-2"},
	}
	for _, tt := range tests {
		if got := ids.claim(venueA, tt.in); got != tt.want {
			t.Errorf("claim(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestThousands(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{{3, "3"}, {950, "950"}, {4400, "4,400"}, {95000, "95,000"}, {1250000, "1,250,000"}}
	for _, tt := range tests {
		if got := thousands(tt.in); got != tt.want {
			t.Errorf("thousands(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
