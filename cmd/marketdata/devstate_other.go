//go:build !unix

package main

import (
	"fmt"
	"io/fs"
)

// checkPrivate refuses a state file that is not a regular file; owners and
// modes are not checked where they are not Unix's.
func checkPrivate(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("dev state %s is not a regular file (%v); remove it or use --state", path, fi.Mode().Type())
	}
	return nil
}
