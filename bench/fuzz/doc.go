// Package fuzz holds fuzz targets, as external tests calling exported
// functions only, for what the reliability suite fuzzes beyond the
// journal's own FuzzDecode: id validation (runtime.ValidateID) and the API
// server's request validation and conversion (api/server on a supervisor
// whose runtime is a recording fake). `go test ./bench/fuzz` runs the seed
// corpus; `make reliability` runs each target with -fuzz for 20 s.
package fuzz
