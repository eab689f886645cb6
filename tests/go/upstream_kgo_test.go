package gotests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"
)

// upstreamKgo is the selection of franz-go's own integration tests (package kgo, at the version
// go.mod pins) run against one rill: each talks to the broker and exercises something the
// others do not, and the whole runs in about a minute. README.md says what each covers, what
// was left out and why, with the measured times.
var upstreamKgo = []string{
	// Produce paths.
	"TestClient_Produce",
	"TestClient_ProduceLargeMessages",
	"TestIssue769",
	"TestIssue831",
	"TestIssueProduceSyncManualPartitionNegativeDoesNotPanic",
	"TestPooling",
	// Fetch paths: direct partitions, pauses, purges, sizes, compression bounds.
	"TestAddRemovePartitions",
	"TestConsumeMaxDecompressBatchBytes",
	"TestDirectPartitionPurge",
	"TestHookPollStart",
	"TestIssue337",
	"TestIssue648",
	"TestIssue865",
	"TestIssueFetchLargerThanBrokerMaxReadBytes",
	"TestPauseIssue489",
	"TestPauseIssueOct2023",
	// Metadata and topic discovery, regex subscriptions, deleted topics.
	"TestConsumeRegex",
	"TestConsumeTopicRetrieval",
	"TestConsumeTopicRetrieval_Many",
	"TestIssue325",
	"TestIssue434",
	"TestIssue523",
	"TestIssue810",
	// Coordinators and groups: classic and KIP-848, the chained group ETL.
	"Test848RegexBrokerResolves",
	"TestGroupETL",
	"TestGroupSimple",
	"TestIssue1034",
	"TestPing",
	// Transactions consuming through a group (read-process-write), classic and KIP-848.
	"TestTxnEtl",
	"TestUnknownGroupOffsetFetchPinned",
}

// upstreamRecords is KGO_TEST_RECORDS for TestGroupETL and TestTxnEtl (TestGroupETL's default,
// 500,000, takes ~18 min here; 20,000 still moves every record through three chained groups per
// balancer, and TestTxnEtl's six variants through transactions in 33 s).
const upstreamRecords = "20000"

// upstreamResult is one top-level upstream test's outcome, from `go test -json`.
type upstreamResult struct {
	action string
	// elapsed is the test's own time, or its longest subtest's: a parent's own time leaves out
	// the subtests it runs in parallel.
	elapsed float64
	output  []string
}

// TestFranzGoUpstreamKgo runs the selection above (`go test github.com/twmb/franz-go/pkg/kgo`)
// against a rill started for it; every selected test must pass (a skip or a test that did not
// run fails too: a renamed upstream test must not drop out of the selection unseen).
func TestFranzGoUpstreamKgo(t *testing.T) {
	r := startRill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 450*time.Second)
	defer cancel()
	pattern := "^(" + strings.Join(upstreamKgo, "|") + ")$"
	cmd := exec.CommandContext(ctx, "go", "test", "github.com/twmb/franz-go/pkg/kgo",
		"-count=1", "-json", "-timeout", "420s", "-run", pattern)
	cmd.Env = append(os.Environ(), "KGO_TEST_RF=1", "KGO_SEEDS="+r.bootstrap,
		"KGO_TEST_RECORDS="+upstreamRecords)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	started := time.Now()
	out, runErr := cmd.Output()
	results := parseUpstream(out)
	t.Logf("upstream kgo: %d tests in %.1f s", len(results), time.Since(started).Seconds())
	names := make([]string, 0, len(results))
	for name := range results {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Logf("  %-4s %6.2f s  %s", results[name].action, results[name].elapsed, name)
	}
	failed := false
	for _, name := range upstreamKgo {
		res, ok := results[name]
		switch {
		case !ok:
			t.Errorf("%s did not run (renamed or removed upstream?)", name)
		case res.action != "pass":
			t.Errorf("%s: %s after %.2f s; its last output:\n%s", name, res.action, res.elapsed,
				lastLines(res.output, 40))
		default:
			continue
		}
		failed = true
	}
	if runErr != nil && !failed {
		t.Errorf("go test of the upstream package: %v\n%s", runErr, lastLines(strings.Split(stderr.String(), "\n"), 40))
	}
}

// parseUpstream reads `go test -json` events into each top-level test's result.
func parseUpstream(out []byte) map[string]*upstreamResult {
	results := map[string]*upstreamResult{}
	scanner := bufio.NewScanner(bytes.NewReader(out))
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var ev struct {
			Action  string
			Test    string
			Elapsed float64
			Output  string
		}
		if json.Unmarshal(scanner.Bytes(), &ev) != nil || ev.Test == "" {
			continue
		}
		top, _, sub := strings.Cut(ev.Test, "/")
		res := results[top]
		if res == nil {
			res = &upstreamResult{}
			results[top] = res
		}
		switch {
		case ev.Action == "output":
			res.output = append(res.output, strings.TrimRight(ev.Output, "\n"))
		case ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip":
			res.elapsed = max(res.elapsed, ev.Elapsed)
			if !sub {
				res.action = ev.Action
			}
		}
	}
	return results
}

// lastLines is the last n of lines, joined.
func lastLines(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
