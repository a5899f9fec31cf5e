// Command cgroupfs-proxy is a diagnostic for `make critest` (CRITEST_PROXY=1,
// see docs/critest.md), never part of the daemon: a transparent gRPC proxy
// from -listen to the daemon's CRI socket -backend that forwards every call
// byte for byte, except that a RuntimeService.RuntimeConfig the daemon
// answers Unimplemented is answered here with the cgroupfs driver.
//
// Why: critest asks RuntimeConfig for the cgroup driver and, when the call
// fails, puts every pod under the systemd slice "/test.slice", which the
// daemon (cgroupfs driver only) refuses; that single answer fails 76 specs.
// With the proxy the run shows what fails behind it. Once the daemon answers
// RuntimeConfig itself, the proxy changes nothing.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const runtimeConfigMethod = "/runtime.v1.RuntimeService/RuntimeConfig"

// frame is one message, kept encoded.
type frame struct{ b []byte }

// rawCodec passes messages through without decoding them.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, errors.New("rawCodec: not a frame")
	}
	return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return errors.New("rawCodec: not a frame")
	}
	f.b = data.Materialize()
	return nil
}

func main() {
	listen := flag.String("listen", "", "unix socket to serve on")
	backend := flag.String("backend", "", "the daemon's CRI unix socket")
	flag.Parse()
	if *listen == "" || *backend == "" {
		log.Fatal("-listen and -backend are required")
	}
	conn, err := grpc.NewClient("unix://"+*backend,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	os.Remove(*listen)
	ln, err := net.Listen("unix", *listen)
	if err != nil {
		log.Fatal(err)
	}
	p := &proxy{conn: conn}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(p.handle),
		grpc.MaxRecvMsgSize(64<<20))
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sigc; srv.Stop() }()
	if err := srv.Serve(ln); err != nil {
		log.Fatal(err)
	}
}

type proxy struct {
	conn   *grpc.ClientConn
	logged sync.Once
}

func (p *proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "no method")
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	if method == runtimeConfigMethod {
		return p.runtimeConfig(ctx, ss)
	}
	cs, err := p.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	// client to daemon
	go func() {
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				cs.CloseSend()
				return
			}
			if err := cs.SendMsg(&f); err != nil {
				return
			}
		}
	}()
	// daemon to client
	first := true
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			if first {
				if md, err := cs.Header(); err == nil {
					ss.SetHeader(md)
				}
			}
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if first {
			if md, err := cs.Header(); err == nil {
				ss.SendHeader(md)
			}
			first = false
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
	}
}

// runtimeConfig forwards RuntimeConfig and answers the cgroupfs driver when
// the daemon does not implement it.
func (p *proxy) runtimeConfig(ctx context.Context, ss grpc.ServerStream) error {
	var req, resp frame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	err := p.conn.Invoke(ctx, runtimeConfigMethod, &req, &resp)
	if status.Code(err) == codes.Unimplemented {
		p.logged.Do(func() {
			log.Printf("RuntimeConfig: the daemon answered %v; answering cgroup_driver CGROUPFS (logged once)", err)
		})
		b, merr := proto.Marshal(&runtimeapi.RuntimeConfigResponse{
			Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
		})
		if merr != nil {
			return merr
		}
		return ss.SendMsg(&frame{b: b})
	}
	if err != nil {
		return err
	}
	return ss.SendMsg(&resp)
}
