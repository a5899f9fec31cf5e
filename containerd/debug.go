package main

import (
	"errors"
	"expvar"
	"net"
	"net/http"
	"net/http/pprof"
	goruntime "runtime"
	"time"

	"github.com/sirupsen/logrus"
)

// serveHTTP serves h on a TCP address opened now, so that a bad address is a
// start-up error; later serving errors are logged (v0.2.9 dropped them:
// docs/api.md 9.6). The server is closed by the returned func.
func serveHTTP(what, addr string, h http.Handler, log *logrus.Entry) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log = log.WithField("address", lis.Addr().String())
	log.Warnf("serving %s over HTTP without authentication", what)
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Errorf("%s server stopped", what)
		}
	}()
	return func() { srv.Close() }, nil
}

// pprofHandler serves /debug/pprof/ and /debug/vars; / redirects to the former.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/vars", expvar.Handler())
	mux.Handle("/", http.RedirectHandler("/debug/pprof/", http.StatusMovedPermanently))
	return mux
}

// dumpStacks logs the stacks of all goroutines (SIGUSR1).
func dumpStacks(log *logrus.Entry) {
	buf := make([]byte, 1<<16)
	for {
		n := goruntime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	log.Infof("=== goroutine stacks (SIGUSR1) ===\n%s\n=== end of goroutine stacks ===", buf)
}
