package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sirupsen/logrus"
)

// setupLogging configures logrus' standard logger, which the other packages
// log through as well, and returns the daemon's entry. --log-level wins over
// --debug; an unparsable level means info with a warning (v0.2.9's
// behaviour, docs/api.md section 5).
func setupLogging(out io.Writer, level string, debug bool, format string) (*logrus.Entry, error) {
	l := logrus.StandardLogger()
	l.SetOutput(out)
	switch format {
	case "text":
		l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339Nano, DisableColors: true})
	case "json":
		l.SetFormatter(&logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano})
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	l.SetLevel(logrus.InfoLevel)
	if debug {
		l.SetLevel(logrus.DebugLevel)
	}
	entry := logrus.NewEntry(l)
	if level != "" {
		lvl, err := logrus.ParseLevel(level)
		if err != nil {
			l.SetLevel(logrus.InfoLevel)
			entry.Warnf("--log-level %q: %v; logging at info", level, err)
		} else {
			l.SetLevel(lvl)
		}
	}
	return entry, nil
}
