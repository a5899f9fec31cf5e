// Command nmeter stands in for busybox's nmeter applet in the busybox image
// of make node-conformance: Debian's busybox-static has no nmeter, and the
// node e2e suite's container lifecycle specs stamp every line they log with
// `date -u +%FT$(nmeter -d0 '%3t' | head -n1)Z` (busybox's date has no
// sub-second format). Only what that needs is here: -d MSEC (the delay
// between lines; default 1000; 0 none) and a format of literal text and
// %t / %Nt (the time of day, HH:MM:SS, with N digits of the second's
// fraction, 0-6). It prints the format once per delay until its output is
// closed (a write to a closed pipe ends it by SIGPIPE).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	delay, format, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nmeter:", err)
		fmt.Fprintf(os.Stderr, "usage: nmeter [-d MSEC] FORMAT (only %%t and %%Nt are supported)\n")
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for {
		line, err := render(format, time.Now())
		if err != nil {
			fmt.Fprintln(os.Stderr, "nmeter:", err)
			os.Exit(1)
		}
		w.WriteString(line + "\n")
		if err := w.Flush(); err != nil {
			os.Exit(1)
		}
		if delay > 0 {
			time.Sleep(time.Duration(delay) * time.Millisecond)
		}
	}
}

// parseArgs reads busybox's getopt style: -dMSEC or -d MSEC, then FORMAT.
func parseArgs(args []string) (delay int, format string, err error) {
	delay = 1000
	for len(args) > 0 && strings.HasPrefix(args[0], "-d") {
		v := strings.TrimPrefix(args[0], "-d")
		args = args[1:]
		if v == "" {
			if len(args) == 0 {
				return 0, "", fmt.Errorf("-d needs a value")
			}
			v, args = args[0], args[1:]
		}
		if delay, err = strconv.Atoi(v); err != nil {
			return 0, "", fmt.Errorf("-d %q: %w", v, err)
		}
	}
	if len(args) != 1 {
		return 0, "", fmt.Errorf("want one FORMAT, have %d arguments", len(args))
	}
	return delay, args[0], nil
}

// render expands %t and %Nt (and %% to %) in format at now.
func render(format string, now time.Time) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return "", fmt.Errorf("format %q ends with %%", format)
		}
		digits := 0
		if d := format[i]; d >= '0' && d <= '9' {
			digits = int(d - '0')
			i++
			if i >= len(format) {
				return "", fmt.Errorf("format %q ends in a directive", format)
			}
		}
		switch format[i] {
		case '%':
			b.WriteByte('%')
		case 't':
			if digits > 6 {
				digits = 6
			}
			b.WriteString(now.Format("15:04:05"))
			if digits > 0 {
				frac := fmt.Sprintf("%06d", now.Nanosecond()/1000)
				b.WriteString("." + frac[:digits])
			}
		default:
			return "", fmt.Errorf("directive %%%c is not supported (only %%t, %%Nt)", format[i])
		}
	}
	return b.String(), nil
}
