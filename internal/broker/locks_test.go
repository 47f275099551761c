package broker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// foreignLocks are the lock sites allowed to take another type's mutex,
// by function and mutex, each with why.
var foreignLocks = map[string]string{}

// TestEachTypeTakesItsOwnLock fails when a function of the package locks a
// mutex that is not its receiver's own field nor a local variable (say
// b.sub.mu.Lock() in a method of *Redis): each type owns its state and its
// lock, and the order of nested locks stays in the methods of the types
// that hold them (locksordering.txt). No run of the tests can see who took
// a lock, so the source is checked.
func TestEachTypeTakesItsOwnLock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, site := range foreignLockSites(t, f) {
			if _, ok := foreignLocks[site.key]; !ok {
				t.Errorf("%s: %s locks another type's mutex; give that type a method that does what is done under it", site.pos, site.key)
			}
		}
	}
}

// TestForeignLockSitesFound checks foreignLockSites on code with and
// without such sites.
func TestForeignLockSitesFound(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"own field", "func (s *subs) f() { s.mu.Lock() }", nil},
		{"local mutex", "func f() { var mu sync.Mutex; mu.Lock() }", nil},
		{"field of a field", "func (b *Redis) f() { b.sub.mu.Lock() }", []string{"f b.sub.mu"}},
		{"read lock", "func (b *Redis) f() { b.health.localMu.RLock() }", []string{"f b.health.localMu"}},
		{"another value's", "func (b *Redis) f(s *subs) { s.mu.Lock() }", []string{"f s.mu"}},
		{"in a closure", "func (b *Redis) f() { go func() { b.pub.mu.Lock() }() }", []string{"f b.pub.mu"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.go")
			if err := os.WriteFile(path, []byte("package x\n"+c.src+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range foreignLockSites(t, path) {
				got = append(got, s.key)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("sites %v, want %v", got, c.want)
			}
		})
	}
}

type lockSite struct {
	pos token.Position
	key string // the function and the mutex: "catchUp b.sub.mu"
}

// foreignLockSites returns the Lock and RLock calls of the file's functions
// on a mutex other than a field of the function's receiver or a local
// variable.
func foreignLockSites(t *testing.T, path string) []lockSite {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sites []lockSite
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		recv := ""
		if fn.Recv != nil && len(fn.Recv.List) > 0 && len(fn.Recv.List[0].Names) > 0 {
			recv = fn.Recv.List[0].Names[0].Name
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Lock" && sel.Sel.Name != "RLock") {
				return true
			}
			if mu := exprString(sel.X); !ownLock(sel.X, recv) {
				sites = append(sites, lockSite{fset.Position(call.Pos()), fn.Name.Name + " " + mu})
			}
			return true
		})
	}
	return sites
}

// ownLock reports whether mu is a local variable or a field of recv.
func ownLock(mu ast.Expr, recv string) bool {
	switch m := mu.(type) {
	case *ast.Ident:
		return true
	case *ast.SelectorExpr:
		id, ok := m.X.(*ast.Ident)
		return ok && recv != "" && id.Name == recv
	}
	return false
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	}
	return "?"
}
