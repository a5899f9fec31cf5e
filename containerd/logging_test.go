package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func TestSetupLogging(t *testing.T) {
	defer logrus.SetOutput(logrus.StandardLogger().Out)
	var b bytes.Buffer
	log, err := setupLogging(&b, "", false, "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.WithField("container", "c1").Info("shown")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["msg"] != "shown" || rec["container"] != "c1" {
		t.Fatalf("json log %q: %v", b.String(), err)
	}
	if _, err := time.Parse(time.RFC3339Nano, rec["time"].(string)); err != nil {
		t.Fatalf("time %v", rec["time"])
	}

	b.Reset()
	log, _ = setupLogging(&b, "", true, "text")
	log.Debug("debug on")
	if !strings.Contains(b.String(), "level=debug msg=\"debug on\"") {
		t.Fatalf("text log %q", b.String())
	}

	b.Reset()
	setupLogging(&b, "loud", true, "text")
	if logrus.GetLevel() != logrus.InfoLevel || !strings.Contains(b.String(), "logging at info") {
		t.Fatalf("bad level: %v, %q", logrus.GetLevel(), b.String())
	}
	setupLogging(&b, "error", true, "text")
	if logrus.GetLevel() != logrus.ErrorLevel {
		t.Fatal("--log-level does not override --debug")
	}
}
