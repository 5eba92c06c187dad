package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/marketdata/marketdata/store"
)

func (c *cli) migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create the database if missing and apply the schema migrations (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(c.getenv, secretsUnused)
			if err != nil {
				return err
			}
			applied, err := store.Migrate(cmd.Context(), cfg.DatabaseURL)
			if err != nil {
				return err
			}
			if applied == nil {
				applied = []int{}
			}
			return c.print(map[string]any{"applied": applied, "version": store.SchemaVersion()},
				fmt.Sprintf("schema at version %d (applied now: %v)", store.SchemaVersion(), applied))
		},
	}
}
