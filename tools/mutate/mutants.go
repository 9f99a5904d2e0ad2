package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
)

// A mutant is one small edit of a source file: bytes [start, end) replaced
// by repl.
type mutant struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
	Op   string `json:"op"`
	Orig string `json:"orig"`
	Repl string `json:"repl"`
	// Key names the mutant for tools/mutate/equivalent.txt in a way that
	// survives edits elsewhere in the file: function, source line, edit,
	// and which of identical such mutants in the function it is.
	Key        string `json:"key"`
	start, end int
	// The enclosing function's lines, for a position no coverage block
	// holds.
	fnStart, fnEnd int
}

func (m mutant) String() string {
	return fmt.Sprintf("%s:%d:%d %s: %s → %s", m.File, m.Line, m.Col, m.Op, oneLine(m.Orig), oneLine(m.Repl))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// The operators. Each is a fault a test should notice:
//
//   - negate: a comparison or && / || turned into its opposite;
//   - boundary: < ↔ <=, > ↔ >= (an off-by-one at the edge);
//   - arith: + ↔ −, * ↔ /, ++ ↔ −− (a wrong formula);
//   - const: an integer literal n → n+1, a float literal x → x·1000, true ↔
//     false (a wrong limit, tolerance or flag);
//   - unwrap: f(x) → x for math.Abs and friends, min/max(a, b) → a or b
//     (a guard or floor removed);
//   - delete: a statement removed — a call, an assignment, an if, a
//     return, break or continue inside a branch (a forgotten check or
//     step).
//
// Mutants that do not compile (deleting the only use of a variable, +
// on strings) are reported as not viable and left out of the score.
type collector struct {
	fset    *token.FileSet
	src     []byte
	file    string
	fn      string                  // the function being visited
	fnLines [2]int                  // its first and last line
	body    map[*ast.BlockStmt]bool // function bodies, declared or literal
	keep    map[*ast.BlockStmt]bool
	out     []mutant
}

func (c *collector) add(op string, from, to token.Pos, repl string) {
	start, end := c.fset.Position(from).Offset, c.fset.Position(to).Offset
	p := c.fset.Position(from)
	c.out = append(c.out, mutant{File: c.file, Line: p.Line, Col: p.Column, Op: op,
		Orig: string(c.src[start:end]), Repl: repl, Key: c.fn, start: start, end: end,
		fnStart: c.fnLines[0], fnEnd: c.fnLines[1]})
}

var (
	negation = map[token.Token]token.Token{token.EQL: token.NEQ, token.NEQ: token.EQL, token.LSS: token.GEQ,
		token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR, token.LAND: token.LOR, token.LOR: token.LAND}
	boundary = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
	arith    = map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL,
		token.ADD_ASSIGN: token.SUB_ASSIGN, token.SUB_ASSIGN: token.ADD_ASSIGN, token.MUL_ASSIGN: token.QUO_ASSIGN,
		token.QUO_ASSIGN: token.MUL_ASSIGN, token.INC: token.DEC, token.DEC: token.INC}
	// unwrapped are single-argument functions whose removal leaves a value
	// of the same type: a missing guard.
	unwrapped = map[string]bool{"math.Abs": true, "math.Sqrt": true, "math.Floor": true, "math.Ceil": true, "cloneBytes": true, "bytes.Clone": true}
)

// collect lists the mutants of one parsed file. Declarations of constants
// and the bodies of String methods are left alone: a changed constant
// there moves every use at once, and message text is not behaviour.
func collect(fset *token.FileSet, f *ast.File, src []byte, name string) []mutant {
	c := &collector{fset: fset, src: src, file: name, body: map[*ast.BlockStmt]bool{}, keep: map[*ast.BlockStmt]bool{}}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil || fd.Name.Name == "String" {
			continue
		}
		c.fn = fd.Name.Name
		c.fnLines = [2]int{fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line}
		c.body[fd.Body] = true
		ast.Inspect(fd.Body, c.visit)
	}
	seen := map[string]int{}
	for i := range c.out {
		m := &c.out[i]
		k := strings.Join([]string{filepath.ToSlash(m.File), m.Key, m.Op, sourceLine(src, m.start), oneLine(m.Orig), oneLine(m.Repl)}, "\t")
		seen[k]++
		m.Key = fmt.Sprintf("%s\t%d", k, seen[k])
	}
	return c.out
}

func sourceLine(src []byte, at int) string {
	start := bytes.LastIndexByte(src[:at], '\n') + 1
	end := bytes.IndexByte(src[at:], '\n')
	if end < 0 {
		end = len(src) - at
	}
	return strings.TrimSpace(string(src[start : at+end]))
}

func (c *collector) visit(n ast.Node) bool {
	switch x := n.(type) {
	case *ast.BinaryExpr:
		if isString(x.X) || isString(x.Y) {
			return true
		}
		if t, ok := negation[x.Op]; ok {
			c.add("negate", x.OpPos, x.OpPos+token.Pos(len(x.Op.String())), t.String())
		}
		if t, ok := boundary[x.Op]; ok {
			c.add("boundary", x.OpPos, x.OpPos+token.Pos(len(x.Op.String())), t.String())
		}
		if t, ok := arith[x.Op]; ok {
			c.add("arith", x.OpPos, x.OpPos+token.Pos(len(x.Op.String())), t.String())
		}
	case *ast.AssignStmt:
		if t, ok := arith[x.Tok]; ok {
			c.add("arith", x.TokPos, x.TokPos+token.Pos(len(x.Tok.String())), t.String())
		}
	case *ast.IncDecStmt:
		c.add("arith", x.TokPos, x.TokPos+2, arith[x.Tok].String())
	case *ast.BasicLit:
		switch x.Kind {
		case token.INT:
			if v, err := strconv.ParseInt(x.Value, 0, 64); err == nil {
				c.add("const", x.Pos(), x.End(), strconv.FormatInt(v+1, 10))
			}
		case token.FLOAT:
			c.add("const", x.Pos(), x.End(), "("+x.Value+"*1000)")
		}
	case *ast.Ident:
		if x.Name == "true" || x.Name == "false" {
			c.add("const", x.Pos(), x.End(), map[string]string{"true": "false", "false": "true"}[x.Name])
		}
	case *ast.CallExpr:
		c.unwrap(x)
	case *ast.FuncLit:
		c.body[x.Body] = true
	case *ast.RangeStmt:
		// Deleting the only statement of a loop that names its variables
		// leaves them unused: it cannot compile.
		if len(x.Body.List) == 1 && (named(x.Key) || named(x.Value)) {
			c.keep[x.Body] = true
		}
	case *ast.BlockStmt:
		if !c.keep[x] {
			c.deleteIn(x.List, c.body[x])
		}
	case *ast.CaseClause:
		c.deleteIn(x.Body, false)
	}
	return true
}

func (c *collector) unwrap(x *ast.CallExpr) {
	name := ""
	switch f := x.Fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		if id, ok := f.X.(*ast.Ident); ok {
			name = id.Name + "." + f.Sel.Name
		}
	}
	switch {
	case unwrapped[name] && len(x.Args) == 1:
		c.add("unwrap", x.Pos(), x.End(), c.text(x.Args[0]))
	case (name == "min" || name == "max" || name == "math.Min" || name == "math.Max") && len(x.Args) == 2:
		c.add("unwrap", x.Pos(), x.End(), c.text(x.Args[0]))
		c.add("unwrap", x.Pos(), x.End(), c.text(x.Args[1]))
	}
}

// deleteIn offers each statement of a list for deletion, except
// declarations (deleting one only breaks the build) and the final return of
// a function body (the function would lack one).
func (c *collector) deleteIn(list []ast.Stmt, funcBody bool) {
	for i, s := range list {
		switch st := s.(type) {
		case *ast.ExprStmt, *ast.IfStmt, *ast.IncDecStmt, *ast.BranchStmt, *ast.SwitchStmt, *ast.RangeStmt, *ast.ForStmt:
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				continue
			}
		case *ast.ReturnStmt:
			if funcBody && i == len(list)-1 && len(st.Results) > 0 {
				continue
			}
		default:
			continue
		}
		c.add("delete", s.Pos(), s.End(), "{}")
	}
}

func (c *collector) text(e ast.Expr) string {
	return "(" + string(c.src[c.fset.Position(e.Pos()).Offset:c.fset.Position(e.End()).Offset]) + ")"
}

func named(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name != "_"
}

func isString(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING
}
