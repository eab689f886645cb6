package gotests

// franz-go (kgo and kadm) against a real rill (issue 30): its admin client, its idempotent producer
// (on by default), a classic consumer group, a KIP-848 group (kgo.ServerSideBalancer) whose members
// commit while the group rebalances, and its transactional producer with a read_committed reader.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func franzClient(t *testing.T, r *rill, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.bootstrap)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func franzTopic(t *testing.T, ctx context.Context, adm *kadm.Client, name string, partitions int32) {
	t.Helper()
	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp[name]; r.Err != nil {
		t.Fatalf("create %s: %v (%s)", name, r.Err, r.ErrMessage)
	}
}

// produceN produces n records "v0".."v{n-1}" with keys spread over the partitions, synchronously.
func produceN(t *testing.T, ctx context.Context, c *kgo.Client, topic string, n int) {
	t.Helper()
	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("v%d", i))}
	}
	if err := c.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// pollUntil polls c until want records arrived or the context ends; it returns their values.
func pollUntil(t *testing.T, ctx context.Context, c *kgo.Client, want int, each func(*kgo.Record)) []string {
	t.Helper()
	var got []string
	for len(got) < want {
		fetches := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d records before the deadline", len(got), want)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s-%d: %v", topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			if each != nil {
				each(r)
			}
		})
	}
	return got
}

func values(n int) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = fmt.Sprintf("v%d", i)
	}
	sort.Strings(v)
	return v
}

func distinct(v []string) int {
	seen := map[string]bool{}
	for _, s := range v {
		seen[s] = true
	}
	return len(seen)
}

func sameSet(t *testing.T, got []string, n int) {
	t.Helper()
	sort.Strings(got)
	want := values(n)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %d records, want each of %d exactly once:\n got %v", len(got), n, got)
	}
}

func TestFranzGoAdminProducerAndClassicGroup(t *testing.T) {
	r := startRill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(franzClient(t, r))
	topic, group := "franz-classic", "franz-classic-group"
	franzTopic(t, ctx, adm, topic, 3)
	produceN(t, ctx, franzClient(t, r), topic, 300)

	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset %s-%d: %v", o.Topic, o.Partition, o.Err)
		}
		total += o.Offset
	})
	if total != 300 {
		t.Fatalf("end offsets sum to %d, want 300", total)
	}

	consumer := franzClient(t, r, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	sameSet(t, pollUntil(t, ctx, consumer, 300, nil), 300)
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		c, ok := committed.Lookup(topic, p)
		end, _ := ends.Lookup(topic, p)
		if !ok || c.Err != nil || c.At != end.Offset {
			t.Fatalf("partition %d: committed %+v, end %d", p, c, end.Offset)
		}
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	d := described[group]
	if d.Err != nil || d.State != "Stable" || len(d.Members) != 1 || d.Protocol == "" {
		t.Fatalf("group described as %+v", d)
	}
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if l := lags[group]; l.Error() != nil || l.Lag.Total() != 0 {
		t.Fatalf("lag %+v (err %v)", l.Lag, l.Error())
	}
}

// Two KIP-848 members (the broker assigns) share six partitions; the second joins while the first
// consumes and commits after every poll, so commits cross the rebalance's epoch bumps. Every
// record is read, and the committed offsets reach the end.
func TestFranzGoServerSideGroupCommitsThroughARebalance(t *testing.T) {
	r := startRill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(franzClient(t, r))
	topic, group := "franz-848", "franz-848-group"
	franzTopic(t, ctx, adm, topic, 6)
	// 60 batches of 10: with 512-byte partition fetches, a poll takes a batch or so, and the
	// members are still reading when the second joins.
	producer := franzClient(t, r, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for b := 0; b < 60; b++ {
		records := make([]*kgo.Record, 10)
		for i := range records {
			n := b*10 + i
			records[i] = &kgo.Record{Topic: topic, Partition: int32(n % 6), Value: []byte(fmt.Sprintf("v%d", n))}
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	member := func() *kgo.Client {
		return franzClient(t, r, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.FetchMaxPartitionBytes(512))
	}
	first := member()
	var got []string
	second := (*kgo.Client)(nil)
	for distinct(got) < 600 {
		if ctx.Err() != nil {
			t.Fatalf("only %d of 600 records before the deadline", len(got))
		}
		for _, c := range []*kgo.Client{first, second} {
			if c == nil {
				continue
			}
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fetches := c.PollFetches(pctx)
			pcancel()
			fetches.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("fetch %s-%d: %v", topic, p, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			if err := c.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit after %d records: %v", len(got), err)
			}
		}
		if second == nil && len(got) > 0 {
			second = member()
		}
	}
	// At least once (Kafka's promise across a rebalance): every record, duplicates counted.
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, v := range values(600) {
		if seen[v] == 0 {
			t.Fatalf("record %s never arrived (%d records read)", v, len(got))
		}
	}
	t.Logf("600 records read, %d delivered again after a partition moved", len(got)-len(seen))
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if c, ok := committed.Lookup(topic, o.Partition); !ok || c.At != o.Offset {
			t.Fatalf("partition %d: committed %+v, end %d", o.Partition, c, o.Offset)
		}
	})
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[group]; d.Err != nil || len(d.Members) != 2 {
		t.Fatalf("ConsumerGroupDescribe: %+v", d)
	}
}

// A transactional producer commits one transaction and aborts the next; a read_committed consumer
// sees exactly the committed records, and the aborted ones stay in the log (read_uncommitted).
func TestFranzGoTransactions(t *testing.T) {
	r := startRill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(franzClient(t, r))
	topic := "franz-txn"
	franzTopic(t, ctx, adm, topic, 2)
	producer := franzClient(t, r, kgo.TransactionalID("franz-txn-id"), kgo.DefaultProduceTopic(topic))
	send := func(prefix string, commit kgo.TransactionEndTry) {
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			rec := &kgo.Record{Value: []byte(fmt.Sprintf("%s%d", prefix, i))}
			if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce in a transaction: %v", err)
			}
		}
		if err := producer.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction (%v): %v", commit, err)
		}
	}
	send("c", kgo.TryCommit)
	send("a", kgo.TryAbort)
	send("v", kgo.TryCommit)

	committed := franzClient(t, r, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for _, v := range pollUntil(t, ctx, committed, 100, nil) {
		if v[0] == 'a' {
			t.Fatalf("read_committed read the aborted record %q", v)
		}
		got = append(got, v)
	}
	// Nothing more is visible: one more poll past the last committed record brings none.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if n := committed.PollFetches(pctx).NumRecords(); n != 0 {
		t.Fatalf("read_committed saw %d more records", n)
	}
	if len(got) != 100 {
		t.Fatalf("read_committed saw %d records, want 100", len(got))
	}
	uncommitted := franzClient(t, r, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if all := pollUntil(t, ctx, uncommitted, 150, nil); len(all) != 150 {
		t.Fatalf("read_uncommitted saw %d records, want 150", len(all))
	}
}
