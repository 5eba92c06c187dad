package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// accountRecord is the JSON form of an account.
type accountRecord struct {
	AccountID       string     `json:"account_id"`
	Name            string     `json:"name"`
	AccessGranted   bool       `json:"access_granted"`
	AccessChangedAt *time.Time `json:"access_changed_at"`
	CreatedAt       time.Time  `json:"created_at"`
}

func recordOfAccount(a *store.Account) accountRecord {
	return accountRecord{a.ID, a.Name, a.AccessGranted, a.AccessChangedAt, a.CreatedAt}
}

// withStore runs fn with a store on MD_DATABASE_URL whose schema is current.
func (c *cli) withStore(ctx context.Context, fn func(*store.Store, *Config) error) error {
	cfg, err := LoadConfig(c.getenv, secretsUnused)
	if err != nil {
		return err
	}
	st, closeStore, err := openStore(ctx, "MD_DATABASE_URL", cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer closeStore()
	return fn(st, cfg)
}

// notifyKeys tells API nodes that an account's keys or access changed. A
// node that misses it still drops its cached entry within the cache TTL.
func (c *cli) notifyKeys(cfg *Config, accountID, keyID string) {
	log, _ := c.logger()
	if log == nil {
		log = slog.Default()
	}
	nc, err := connectNATS(cfg.NATSURL, "marketdata cli", log)
	if err != nil {
		log.Warn("key change notice not sent; API nodes see the change when their cache entry expires", "err", err)
		return
	}
	defer nc.Close()
	if err := notice.Publish(nc, notice.KeySubject, notice.Key{AccountID: accountID, KeyID: keyID}.Encode()); err != nil {
		log.Warn("key change notice not sent", "err", err)
	}
}

func (c *cli) accountCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "account", Short: "Manage accounts"}
	var name string
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create an account (without API access) and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("--name: required")
			}
			return c.withStore(cmd.Context(), func(st *store.Store, _ *Config) error {
				a, err := st.CreateAccount(cmd.Context(), name, time.Now())
				if err != nil {
					return err
				}
				return c.print(map[string]string{"account_id": a.ID}, a.ID)
			})
		},
	}
	create.Flags().StringVar(&name, "name", "", "account name")
	cmd.AddCommand(create)
	return cmd
}

func (c *cli) accessCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "access", Short: "Grant or withdraw an account's API access"}
	for _, grant := range []bool{true, false} {
		var account string
		verb := map[bool]string{true: "grant", false: "withdraw"}[grant]
		sub := &cobra.Command{
			Use:   verb + " --account ID",
			Short: map[bool]string{true: "Grant API access", false: "Withdraw API access: the account's keys answer 403 access_not_granted"}[grant],
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if account == "" {
					return errors.New("--account: required")
				}
				return c.withStore(cmd.Context(), func(st *store.Store, cfg *Config) error {
					a, err := st.SetAccess(cmd.Context(), account, grant, time.Now())
					if err != nil {
						return err
					}
					c.notifyKeys(cfg, a.ID, "")
					return c.print(recordOfAccount(a), fmt.Sprintf("account %s: access granted = %v", a.ID, a.AccessGranted))
				})
			},
		}
		sub.Flags().StringVar(&account, "account", "", "account id")
		cmd.AddCommand(sub)
	}
	return cmd
}
