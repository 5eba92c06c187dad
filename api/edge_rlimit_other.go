//go:build !unix

package api

import "log/slog"

// WarnFileLimit has no open-file limit to compare with on this system.
func WarnFileLimit(*slog.Logger, int) {}
