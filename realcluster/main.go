// Command realcluster is a real Kubernetes control plane for tests, in one process on loopback: an
// embedded etcd (go.etcd.io/etcd/server/v3/embed) and kube-apiserver (k8s.io/kubernetes at one release).
// One process, not two, so one signal or one kill ends both and a test never leaves an etcd behind.
//
//	realcluster --data-dir D [--etcd-url-file F] -- <kube-apiserver flags>
//
// etcd listens on a free loopback port; its client URL is passed
// to kube-apiserver as --etcd-servers and written to F, so a test can compact etcd through its JSON gateway.
package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "realcluster: "+format+"\n", args...)
	os.Exit(code)
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(1, "no free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func main() {
	fs := pflag.NewFlagSet("realcluster", pflag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "etcd's data folder (required)")
	urlFile := fs.String("etcd-url-file", "", "a file to write etcd's client URL to once it serves")
	if err := fs.Parse(os.Args[1:]); err != nil {
		fail(2, "%v", err)
	}
	if *dataDir == "" {
		fail(2, "--data-dir is required")
	}

	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	// The client URL needs a real port: etcd's JSON gateway (what a test compacts through) dials the
	// advertised one. A free port, asked of the kernel just before etcd binds it.
	client := url.URL{Scheme: "http", Host: freePort()}
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.LogLevel = "error"
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// As kubeadm runs etcd for a cluster: progress notifications every 5 s (etcd's default is 10 min), so
	// kube-apiserver's watch cache learns the current revision on a quiet resource and its bookmarks carry
	// it; without them a bookmark never passes a watch that began at a list's (newer) version.
	cfg.WatchProgressNotifyInterval = 5 * time.Second
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		fail(1, "etcd: %v", err)
	}
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		etcd.Close()
		fail(1, "etcd not ready within 60 s")
	}
	etcdURL := "http://" + etcd.Clients[0].Addr().String()
	if *urlFile != "" {
		// Written whole then renamed, so a reader never sees half a URL.
		tmp := *urlFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(etcdURL+"\n"), 0o600); err != nil {
			etcd.Close()
			fail(1, "%v", err)
		}
		if err := os.Rename(tmp, *urlFile); err != nil {
			etcd.Close()
			fail(1, "%v", err)
		}
	}

	command := app.NewAPIServerCommand()
	command.SetArgs(append([]string{"--etcd-servers=" + etcdURL}, fs.Args()...))
	code := cli.Run(command)
	etcd.Close()
	os.Exit(code)
}
