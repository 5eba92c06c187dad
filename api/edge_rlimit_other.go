//go:build !unix

package api

import "log/slog"

// warnFileLimit has no open-file limit to compare with on this system.
func warnFileLimit(*slog.Logger, int) {}
