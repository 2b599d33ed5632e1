package peers

import "runtime/debug"

// ModuleVersion returns the version of the module path this binary was
// built with, from its build info ("v4.18.1"; "(devel)" for a module
// replaced by a directory, as the repository's own distlock is), or ""
// when the binary does not include it or has no build info.
func ModuleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return versionIn(bi.Deps, path)
}

func versionIn(deps []*debug.Module, path string) string {
	for _, m := range deps {
		switch {
		case m.Path != path:
		case m.Replace == nil:
			return m.Version
		case m.Replace.Version != "":
			return m.Replace.Version
		default:
			return "(devel)"
		}
	}
	return ""
}
