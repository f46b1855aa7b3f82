package route

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRoutesReadOnlyTheContract checks that this package uses only what
// internal/gateway/contract.go declares, so that the contract between the
// two composers is one file: a change to how the gateway is composed
// cannot reach a route except through it.
func TestRoutesReadOnlyTheContract(t *testing.T) {
	fset := token.NewFileSet()
	contract, err := parser.ParseFile(fset, filepath.Join("..", "gateway", "contract.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range contract.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				declared[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					declared[sp.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						declared[n.Name] = true
					}
				}
			}
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var outside []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok && x.Name == "gateway" && !declared[s.Sel.Name] {
					outside = append(outside, f+": gateway."+s.Sel.Name)
				}
			}
			return true
		})
	}
	slices.Sort(outside)
	if diff := cmp.Diff([]string(nil), slices.Compact(outside)); diff != "" {
		t.Errorf("internal/route uses identifiers of internal/gateway that contract.go does not declare: -want, +got:\n%s", diff)
	}
	if len(declared) == 0 {
		t.Fatal("found no declarations in contract.go; the check would prove nothing")
	}
}
