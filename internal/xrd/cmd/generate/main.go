// Command generate writes the XRDs internal/xrd generates into the folder
// its one argument names. go generate runs it (internal/xrd/generate.go).
package main

import (
	"fmt"
	"os"

	"github.com/modelplaneai/function-inference-gateway/internal/xrd"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: generate <output folder>")
		os.Exit(2)
	}
	wd, err := os.Getwd()
	if err == nil {
		var files map[string][]byte
		if files, err = xrd.Generate(wd); err == nil {
			err = xrd.Write(os.Args[1], files)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}
