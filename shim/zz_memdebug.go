package main

import (
	"os"
	"runtime"
	"strconv"
	"time"
)

func memdebug() {
	if os.Getenv("SHIM_MEMDEBUG") == "" {
		return
	}
	go func() {
		time.Sleep(2 * time.Second)
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s := ""
		add := func(k string, v uint64) { s += k + "=" + strconv.FormatUint(v>>10, 10) + "K\n" }
		add("HeapSys", m.HeapSys)
		add("HeapInuse", m.HeapInuse)
		add("HeapIdle", m.HeapIdle)
		add("HeapReleased", m.HeapReleased)
		add("HeapAlloc", m.HeapAlloc)
		add("StackInuse", m.StackInuse)
		add("StackSys", m.StackSys)
		add("MSpanSys", m.MSpanSys)
		add("MCacheSys", m.MCacheSys)
		add("BuckHashSys", m.BuckHashSys)
		add("GCSys", m.GCSys)
		add("OtherSys", m.OtherSys)
		add("Sys", m.Sys)
		add("NumGC", uint64(m.NumGC)<<10)
		add("NumGoroutine", uint64(runtime.NumGoroutine())<<10)
		os.WriteFile("/tmp/memstats", []byte(s), 0o644)
	}()
}
