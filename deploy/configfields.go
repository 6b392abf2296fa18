package deploy

import (
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// ConfigPackage is the package of azure.json's struct.
const ConfigPackage = "github.com/azure-ccm/azure-ccm/internal/config"

// configNonUseFiles are the files of the config package whose reads of a field are not uses:
// decoding, environment overrides, defaults, validation and printing touch every key whether or
// not anything acts on it.
var configNonUseFiles = map[string]bool{"load.go": true, "defaults.go": true, "validate.go": true, "secret.go": true}

// ConfigField is one top-level key of azure.json.
type ConfigField struct {
	Name string // Go field name
	Key  string // JSON key
	// ReadBy lists where the field is read (package path and function), outside the config
	// package or through one of its accessors that code outside calls.
	ReadBy []string
}

// ConfigFieldReads type-checks the given packages of the module at dir (they must include the
// config package) and reports, for every field of config.Config, the functions that read it.
// A field counts as read when a selector expression selects it outside the config package
// (assignments to it do not count), or inside an accessor of the config package (a function
// or method outside configNonUseFiles) that code outside calls, directly or through other
// accessors.
func ConfigFieldReads(dir string, pkgPaths []string) ([]ConfigField, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedSyntax | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedImports,
		Dir: dir,
		Env: makeBuildEnv(),
	}
	pkgs, err := packages.Load(cfg, pkgPaths...)
	if err != nil {
		return nil, err
	}
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading packages: %s", strings.Join(errs, "; "))
	}

	var cfgPkg *packages.Package
	for _, p := range pkgs {
		if p.PkgPath == ConfigPackage {
			cfgPkg = p
		}
	}
	if cfgPkg == nil {
		return nil, fmt.Errorf("%s is not among the loaded packages", ConfigPackage)
	}
	obj := cfgPkg.Types.Scope().Lookup("Config")
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		return nil, fmt.Errorf("config.Config is not a struct")
	}
	fields := make([]ConfigField, 0, st.NumFields())
	index := map[string]int{}
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		key, _, _ := strings.Cut(reflect.StructTag(st.Tag(i)).Get("json"), ",")
		if key == "" || key == "-" {
			continue
		}
		index[f.Name()] = len(fields)
		fields = append(fields, ConfigField{Name: f.Name(), Key: key})
	}

	// Inside the config package: what each accessor reads and which accessors it calls.
	type accessor struct {
		fields  []string
		callees []string
	}
	accessors := map[string]*accessor{}
	for i, f := range cfgPkg.Syntax {
		if configNonUseFiles[filepath.Base(cfgPkg.CompiledGoFiles[i])] {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			a := &accessor{}
			accessors[funcKey(fd)] = a
			walkReads(fd.Body, cfgPkg.TypesInfo, func(field string) { a.fields = append(a.fields, field) },
				func(fn *types.Func) { a.callees = append(a.callees, objKey(fn)) })
		}
	}

	// Outside: direct field reads, and the config functions and methods called.
	var entries []string
	entryFrom := map[string]string{}
	for _, p := range pkgs {
		if p.PkgPath == ConfigPackage {
			continue
		}
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				where := p.PkgPath
				if fd, ok := d.(*ast.FuncDecl); ok {
					where += "." + funcKey(fd)
				}
				walkReads(d, p.TypesInfo, func(field string) {
					if i, ok := index[field]; ok {
						fields[i].ReadBy = appendUnique(fields[i].ReadBy, where)
					}
				}, func(fn *types.Func) {
					k := objKey(fn)
					if _, seen := entryFrom[k]; !seen {
						entryFrom[k] = where
						entries = append(entries, k)
					}
				})
			}
		}
	}
	// Accessors reachable from outside read their fields on the caller's behalf.
	seen := map[string]bool{}
	for len(entries) > 0 {
		k := entries[0]
		entries = entries[1:]
		a, ok := accessors[k]
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		for _, field := range a.fields {
			if i, ok := index[field]; ok {
				fields[i].ReadBy = appendUnique(fields[i].ReadBy, entryFrom[k]+" via config."+k)
			}
		}
		for _, c := range a.callees {
			if _, ok := entryFrom[c]; !ok {
				entryFrom[c] = entryFrom[k]
			}
			entries = append(entries, c)
		}
	}
	for i := range fields {
		sort.Strings(fields[i].ReadBy)
	}
	return fields, nil
}

// walkReads calls field for every read of a config.Config field under n and fn for every call
// or reference of a function or method of the config package.
func walkReads(n ast.Node, info *types.Info, field func(string), fn func(*types.Func)) {
	written := map[*ast.SelectorExpr]bool{}
	ast.Inspect(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.AssignStmt:
			for _, l := range x.Lhs {
				if s, ok := l.(*ast.SelectorExpr); ok {
					written[s] = true
				}
			}
		case *ast.IncDecStmt:
			if s, ok := x.X.(*ast.SelectorExpr); ok {
				written[s] = true
			}
		case *ast.SelectorExpr:
			if sel, ok := info.Selections[x]; ok {
				switch sel.Kind() {
				case types.FieldVal:
					if !written[x] && isConfigStruct(sel.Recv()) {
						field(x.Sel.Name)
					}
				case types.MethodVal, types.MethodExpr:
					if f, ok := sel.Obj().(*types.Func); ok && f.Pkg() != nil && f.Pkg().Path() == ConfigPackage {
						fn(f)
					}
				}
			}
		case *ast.Ident:
			if f, ok := info.Uses[x].(*types.Func); ok && f.Pkg() != nil && f.Pkg().Path() == ConfigPackage {
				if sig, ok := f.Type().(*types.Signature); ok && sig.Recv() == nil {
					fn(f)
				}
			}
		}
		return true
	})
}

func isConfigStruct(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Config" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == ConfigPackage
}

// funcKey names a declaration: "F" or "Recv.M".
func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// objKey names a function object the way funcKey names its declaration.
func objKey(f *types.Func) string {
	sig, ok := f.Type().(*types.Signature)
	if !ok || sig.Recv() == nil {
		return f.Name()
	}
	t := sig.Recv().Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name() + "." + f.Name()
	}
	return f.Name()
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
