//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkPrivate refuses a state file that is not a regular file owned by the
// caller with no permission for group or others.
func checkPrivate(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("dev state %s is not a regular file (%v); remove it or use --state", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("dev state %s has mode %v: it holds secrets and must be readable by its owner only (chmod 600, or --reset)", path, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("dev state %s belongs to user %d, not to you (%d); remove it or use --state", path, st.Uid, os.Getuid())
	}
	return nil
}
