//go:build !unix

package edge

import (
	"errors"
	"log/slog"
)

// WarnFileLimit has no open-file limit to compare with on this system.
func WarnFileLimit(*slog.Logger, int) {}

// RaiseFileLimit has no open-file limit to raise on this system.
func RaiseFileLimit() (uint64, error) { return 0, errors.ErrUnsupported }
