// Command cri is the small CRI v1 client of `make kubelet-e2e`
// (integration/kubelet/run.sh): it lists what a runtime holds, one line per
// object, in a form the script greps, and removes leftover pods.
//
//	cri -socket PATH version
//	cri -socket PATH status                 runtime conditions: "TYPE true|false REASON MESSAGE"
//	cri -socket PATH pods                   "pod ID NAME NAMESPACE ATTEMPT STATE IP"
//	cri -socket PATH containers             "container ID POD NAME ATTEMPT STATE EXITCODE REASON"
//	cri -socket PATH images                 "image ID TAGS..."
//	cri -socket PATH rmpods                 stop and remove every pod (cleanup)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	socket := flag.String("socket", "", "the CRI unix socket")
	timeout := flag.Duration("timeout", 10*time.Second, "bound of each call")
	flag.Parse()
	if *socket == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: cri -socket PATH version|status|pods|containers|images|rmpods")
		os.Exit(2)
	}
	conn, err := grpc.NewClient("unix://"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	c := client{rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn), timeout: *timeout}
	switch flag.Arg(0) {
	case "version":
		err = c.version()
	case "status":
		err = c.status()
	case "pods":
		err = c.pods()
	case "containers":
		err = c.containers()
	case "images":
		err = c.images()
	case "rmpods":
		err = c.rmpods()
	default:
		err = fmt.Errorf("unknown command %q", flag.Arg(0))
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cri:", err)
	os.Exit(1)
}

type client struct {
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
	timeout time.Duration
}

func (c client) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

func (c client) version() error {
	ctx, cancel := c.ctx()
	defer cancel()
	v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return err
	}
	fmt.Printf("version %s %s %s\n", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
	return nil
}

func (c client) status() error {
	ctx, cancel := c.ctx()
	defer cancel()
	st, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return err
	}
	for _, cond := range st.GetStatus().GetConditions() {
		fmt.Printf("%s %t %s %s\n", cond.Type, cond.Status, dash(cond.Reason), dash(cond.Message))
	}
	return nil
}

func (c client) pods() error {
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		ip := "-"
		if st, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.Id}); err == nil {
			ip = dash(st.GetStatus().GetNetwork().GetIp())
		}
		m := p.GetMetadata()
		fmt.Printf("pod %s %s %s %d %s %s\n", p.Id, m.GetName(), m.GetNamespace(), m.GetAttempt(), p.State, ip)
	}
	return nil
}

func (c client) containers() error {
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	for _, ct := range list.Containers {
		exit, reason := "-", "-"
		if st, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ct.Id}); err == nil {
			if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				exit = fmt.Sprint(st.Status.ExitCode)
			}
			reason = dash(st.Status.Reason)
		}
		m := ct.GetMetadata()
		fmt.Printf("container %s %s %s %d %s %s %s\n", ct.Id, ct.PodSandboxId, m.GetName(), m.GetAttempt(), ct.State, exit, reason)
	}
	return nil
}

func (c client) images() error {
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := c.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return err
	}
	for _, im := range list.Images {
		fmt.Printf("image %s %s\n", im.Id, strings.Join(im.RepoTags, " "))
	}
	return nil
}

// rmpods stops and removes every pod (their containers go with them), as
// kubelet would; it goes on past errors and returns the first.
func (c client) rmpods() error {
	ctx, cancel := c.ctx()
	defer cancel()
	list, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var first error
	for _, p := range list.Items {
		if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil && first == nil {
			first = fmt.Errorf("stop pod %s: %w", p.Id, err)
		}
		if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil && first == nil {
			first = fmt.Errorf("remove pod %s: %w", p.Id, err)
		}
		fmt.Printf("removed pod %s %s\n", p.Id, p.GetMetadata().GetName())
	}
	return first
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, " ", "_")
}
