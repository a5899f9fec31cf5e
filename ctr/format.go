package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// formatFlag selects between the v0.2.9 table and JSON.
var formatFlag = &cli.StringFlag{Name: "format", Value: "table", Usage: "output format: table or json"}

// outputFormat returns the validated --format value.
func outputFormat(c *cli.Context) (string, error) {
	switch f := c.String("format"); f {
	case "table", "json":
		return f, nil
	default:
		return "", missing("--format %q: want table or json", f)
	}
}

// printCompactJSON prints v as one line of JSON, as v0.2.9's `ctr
// containers stats` did (scripts grep it).
func printCompactJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printJSON writes v as indented JSON. Generated API structs keep the
// proto field names as JSON names (docs/api.md 2.2), as v0.2.9's ctr printed.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
