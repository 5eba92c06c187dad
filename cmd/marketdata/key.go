package main

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/store"
)

var daysPattern = regexp.MustCompile(`(\d+(?:\.\d+)?)d`)

// parseLifetime reads Go durations plus a d suffix (90d, 1d12h, 3s).
func parseLifetime(v string) (time.Duration, error) {
	var bad error
	expanded := daysPattern.ReplaceAllStringFunc(v, func(m string) string {
		f, err := strconv.ParseFloat(strings.TrimSuffix(m, "d"), 64)
		if err != nil {
			bad = err
		}
		return strconv.FormatFloat(f*24, 'f', -1, 64) + "h"
	})
	d, err := time.ParseDuration(expanded)
	if err != nil || bad != nil {
		return 0, fmt.Errorf("--expires-in: %q is not a duration like 90d, 12h or 3s", v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("--expires-in: %q is not positive", v)
	}
	if d > store.MaxKeyLifetime {
		return 0, fmt.Errorf("--expires-in: %q is longer than 365d", v)
	}
	return d, nil
}

// days writes a whole number of days as parseLifetime reads it ("90d").
func days(d time.Duration) string {
	return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
}

// parseScopes checks a comma-separated scope list: known scopes only, and
// `trade` refused.
func parseScopes(v string) ([]string, error) {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			continue
		case s == store.ScopeTrade:
			return nil, errors.New("--scopes: trade is reserved and refused at creation")
		case !slices.Contains(store.KnownScopes, s):
			return nil, fmt.Errorf("--scopes: unknown scope %q (known: %s)", s, strings.Join(store.KnownScopes, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func parseAllowlist(vs []string) ([]netip.Prefix, error) {
	if len(vs) > store.MaxAllowlist {
		return nil, fmt.Errorf("--allow-ip: %d entries, at most %d", len(vs), store.MaxAllowlist)
	}
	out := make([]netip.Prefix, 0, len(vs))
	for _, v := range vs {
		p, err := parseCIDR(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("--allow-ip: %v", err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (c *cli) keyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "Manage API keys"}
	cmd.AddCommand(c.keyCreateCmd(), c.keyRevokeCmd(), c.keyListCmd())
	return cmd
}

func (c *cli) keyCreateCmd() *cobra.Command {
	var account, scopes, expiresIn string
	var allow []string
	cmd := &cobra.Command{
		Use:   "create --account ID --scopes S1,S2 [--expires-in 90d] [--allow-ip CIDR]...",
		Short: "Create a key and print its secret, once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if account == "" {
				return errors.New("--account: required")
			}
			sc, err := parseScopes(scopes)
			if err != nil {
				return err
			}
			life, err := parseLifetime(expiresIn)
			if err != nil {
				return err
			}
			cidrs, err := parseAllowlist(allow)
			if err != nil {
				return err
			}
			cfg, err := LoadConfig(c.getenv, secretsPepper)
			if err != nil {
				return err
			}
			return c.withStore(cmd.Context(), func(st *store.Store, _ *Config) error {
				secret := store.NewSecret()
				now := time.Now().UTC()
				k, err := st.CreateKey(cmd.Context(), store.NewKey{
					AccountID: account, SecretHash: store.HashSecret(cfg.KeyPepper, secret),
					Last4: secret[len(secret)-4:], Scopes: sc, IPAllowlist: cidrs,
					CreatedAt: now, ExpiresAt: now.Add(life),
				})
				if err != nil {
					return err
				}
				c.notifyKeys(cfg, k.AccountID, k.ID)
				r := store.RecordOf(k, now)
				return c.print(map[string]any{
					"key_id": k.ID, "secret": secret, "last4": k.Last4, "scopes": r.Scopes,
					"ip_allowlist": r.IPAllowlist, "created_at": k.CreatedAt, "expires_at": k.ExpiresAt,
				}, fmt.Sprintf("key %s created (expires %s)\nsecret (shown once, store it now): %s",
					k.ID, k.ExpiresAt.Format(time.RFC3339), secret))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&account, "account", "", "account id")
	f.StringVar(&scopes, "scopes", "", "comma-separated scopes: "+strings.Join(store.KnownScopes, ", "))
	f.StringVar(&expiresIn, "expires-in", days(store.DefaultKeyLifetime), "lifetime: a Go duration or days (90d), at most "+days(store.MaxKeyLifetime))
	f.StringArrayVar(&allow, "allow-ip", nil, "allowed client CIDR (IPv4 or IPv6); repeat up to 20 times; none = any address")
	return cmd
}

func (c *cli) keyRevokeCmd() *cobra.Command {
	var keyID string
	cmd := &cobra.Command{
		Use:   "revoke --key KEY_ID",
		Short: "Revoke a key: every API node refuses it within a second",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyID == "" {
				return errors.New("--key: required")
			}
			return c.withStore(cmd.Context(), func(st *store.Store, cfg *Config) error {
				k, err := st.RevokeKey(cmd.Context(), keyID, time.Now())
				if err != nil {
					return err
				}
				c.notifyKeys(cfg, k.AccountID, k.ID)
				return c.print(store.RecordOf(k, time.Now()), fmt.Sprintf("key %s revoked at %s", k.ID, k.RevokedAt.Format(time.RFC3339)))
			})
		},
	}
	cmd.Flags().StringVar(&keyID, "key", "", "key id")
	return cmd
}

func (c *cli) keyListCmd() *cobra.Command {
	var account string
	cmd := &cobra.Command{
		Use:   "list --account ID",
		Short: "List an account's keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if account == "" {
				return errors.New("--account: required")
			}
			return c.withStore(cmd.Context(), func(st *store.Store, _ *Config) error {
				keys, err := st.Keys(cmd.Context(), account)
				if err != nil {
					return err
				}
				now := time.Now()
				recs := make([]store.KeyRecord, len(keys))
				var text strings.Builder
				for i := range keys {
					recs[i] = store.RecordOf(&keys[i], now)
					fmt.Fprintf(&text, "%s  …%s  %-8s  scopes=%s  expires=%s\n", recs[i].KeyID, recs[i].Last4,
						recs[i].Status, strings.Join(recs[i].Scopes, ","), recs[i].ExpiresAt.Format(time.RFC3339))
				}
				return c.print(map[string]any{"data": recs}, strings.TrimSuffix(text.String(), "\n"))
			})
		},
	}
	cmd.Flags().StringVar(&account, "account", "", "account id")
	return cmd
}
