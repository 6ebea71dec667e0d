package gateway

import (
	"slices"
	"strconv"
)

// CanonicalHash exposes canonicalHash to the fuzz tests.
var CanonicalHash = canonicalHash

// ParseIdentity exposes parseIdentity to the fuzz tests.
var ParseIdentity = parseIdentity

// MethodOf exposes methodOf to the fuzz tests.
var MethodOf = methodOf

// RoutePath exposes routePath to the fuzz tests.
var RoutePath = routePath

// JSONParams and JSONParamsDecoded expose the two forms of a JSON body's
// canonical parameters to FuzzJSONParams, as sorted lines of name and
// value, each quoted, so that no two lists read alike.
var (
	JSONParams        = func(b []byte) ([]string, bool) { return paramLines(jsonParams(b)) }
	JSONParamsDecoded = func(b []byte) ([]string, bool) { return paramLines(jsonParamsDecoded(b)) }
)

func paramLines(ps []param, ok bool) ([]string, bool) {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, strconv.Quote(p.name)+"="+strconv.Quote(p.value))
	}
	slices.Sort(out)
	return out, ok
}
