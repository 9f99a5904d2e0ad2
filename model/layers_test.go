package model_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/patrdb/patrdb/"

// The data model sits below the storage engine: model imports only the
// standard library and store imports only model of this module, so every
// layer above shares one set of record types and none links more than it
// needs.
func TestLayersBelowTheStore(t *testing.T) {
	allowed := map[string][]string{
		module + "model": nil,
		module + "store": {module + "model", module + "store/"},
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../model", "../store").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if !strings.Contains(imp, ".") {
				continue // standard library
			}
			if f[0] == module+"model" {
				t.Errorf("package model imports %s: it may import only the standard library", imp)
				continue
			}
			if strings.HasPrefix(imp, module) && !hasPrefix(imp, allowed[f[0]]) {
				t.Errorf("package %s imports %s of this module", f[0], imp)
			}
		}
	}
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p) && strings.HasSuffix(p, "/") {
			return true
		}
	}
	return false
}

// A type has one name: no package re-exports another package's type of
// this module under an alias, so a reader never has to learn which of two
// names is the real one.
func TestNoAliasesBetweenPackages(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ours := map[string]bool{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			ours[name] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Assign.IsValid() {
				return true
			}
			if sel, ok := ts.Type.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && ours[x.Name] {
					t.Errorf("%s: type %s = %s.%s re-exports a type of this module", fset.Position(ts.Pos()), ts.Name.Name, x.Name, sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
