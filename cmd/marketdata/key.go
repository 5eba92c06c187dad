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
	var account, scopes, expiresIn, statePath string
	var allow []string
	var dev bool
	cmd := &cobra.Command{
		Use:   "create --account ID --scopes S1,S2 [--expires-in 90d] [--allow-ip CIDR]...",
		Short: "Create a key and print its secret, once",
		Long: "Create a key and print its secret, once.\n\n" +
			"Reads MD_DATABASE_URL and MD_KEY_PEPPER (required; the API nodes' pepper). With --dev, both come\n" +
			"from the state file of `marketdata dev` unless set, and --account defaults to dev's demo account.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := c
			if dev {
				dc, demo, err := c.devCLI(statePath)
				if err != nil {
					return err
				}
				c = dc
				if account == "" {
					account = demo
				}
			}
			if account == "" {
				return errors.New("--account: required")
			}
			// A key made without a word about scopes has none: it can read
			// /key and nothing else, which nobody means by omission.
			if !cmd.Flags().Changed("scopes") {
				return fmt.Errorf("--scopes: required, comma-separated: %s (--scopes '' makes a key that can only read /key)", strings.Join(store.KnownScopes, ", "))
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
			if ce := (*configError)(nil); errors.As(err, &ce) && ce.name == "MD_KEY_PEPPER" && !dev {
				ce.reason += "; for the database of `marketdata dev`, add --dev (its pepper is in dev's state file)"
			}
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
	f.BoolVar(&dev, "dev", false, "use the database and key pepper of marketdata dev (from its state file, unless MD_DATABASE_URL or MD_KEY_PEPPER is set: if dev ran with MD_KEY_PEPPER set, set it here too); --account defaults to its demo account")
	f.StringVar(&statePath, "state", defaultDevStatePath(c.getenv), "with --dev: dev's state file (dev's --state)")
	return cmd
}

// devCLI is c reading the environment as `marketdata dev` does: where
// MD_DATABASE_URL or MD_KEY_PEPPER is unset, the value dev keeps in its
// state file at path. It returns dev's demo account too, when the database
// is dev's.
func (c *cli) devCLI(path string) (*cli, string, error) {
	if path == "" {
		return nil, "", errors.New("--state: neither XDG_STATE_HOME nor HOME is set: name dev's state file with --state")
	}
	st, err := loadDevState(path)
	if err != nil {
		return nil, "", err
	}
	if st.Version == 0 {
		return nil, "", fmt.Errorf("--dev: no dev state at %s: run `marketdata dev` first (or name its file with --state)", path)
	}
	dc := *c
	dc.getenv = func(name string) string {
		if v := c.getenv(name); v != "" {
			return v
		}
		switch name {
		case "MD_KEY_PEPPER":
			return st.KeyPepper
		case "MD_DATABASE_URL":
			return st.Database
		}
		return ""
	}
	demo := st.AccountID
	if db := c.getenv("MD_DATABASE_URL"); db != "" && redactedDSN(db) != st.Database {
		demo = "" // another database than dev's: its demo account is not there
	}
	return &dc, demo, nil
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
