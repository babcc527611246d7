//go:build ignore

// mage.go runs the build targets in magefile.go without installing mage:
//
//	go run mage.go <target>
//
// `go run mage.go -l` lists the targets.
package main

import (
	"os"

	"github.com/magefile/mage/mage"
)

func main() { os.Exit(mage.Main()) }
