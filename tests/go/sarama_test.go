package gotests

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.ClientID = "rill-sarama-smoke"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Metadata.AllowAutoTopicCreation = false
	c.Producer.Partitioner = sarama.NewManualPartitioner // the test picks each record's partition
	return c
}

// TestSaramaSmoke: admin (create, describe, list, delete), the sync and the idempotent async
// producer with compression, a partition consumer, and a two-member consumer group that commits.
func TestSaramaSmoke(t *testing.T) {
	r := startRill(t)
	cfg := saramaConfig()
	admin, err := sarama.NewClusterAdmin([]string{r.bootstrap}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	topic := fmt.Sprintf("sarama-%d", time.Now().UnixNano())
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": ptr("3600000")}}, false); err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	topics, err := admin.ListTopics()
	if err != nil || topics[topic].NumPartitions != 3 {
		t.Fatalf("list topics: %v %+v", err, topics[topic])
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e.Name == "retention.ms" && e.Value == "3600000" {
			found = true
		}
	}
	if !found {
		t.Fatalf("retention.ms=3600000 not described: %+v", entries)
	}
	brokers, controller, err := admin.DescribeCluster()
	if err != nil || len(brokers) != 1 || controller != 1 {
		t.Fatalf("describe cluster: %v, %d brokers, controller %d", err, len(brokers), controller)
	}

	// Sync producer: 30 records over the three partitions.
	sp, err := sarama.NewSyncProducer([]string{r.bootstrap}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		_, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: int32(i % 3),
			Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("sync %d", i)),
			Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: []byte("v")}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	sp.Close()

	// Idempotent async producer, zstd.
	acfg := saramaConfig()
	acfg.Producer.Idempotent = true
	acfg.Net.MaxOpenRequests = 1
	acfg.Producer.Compression = sarama.CompressionZSTD
	ap, err := sarama.NewAsyncProducer([]string{r.bootstrap}, acfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		ap.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 3),
			Value: sarama.StringEncoder(fmt.Sprintf("async %d", i))}
	}
	for i := 0; i < 30; i++ {
		select {
		case <-ap.Successes():
		case e := <-ap.Errors():
			t.Fatal(e)
		case <-time.After(30 * time.Second):
			t.Fatal("async producer: no ack within 30 s")
		}
	}
	ap.Close()

	// A partition consumer reads partition 0 from the start: 10 sync and 10 async records in order.
	consumer, err := sarama.NewConsumer([]string{r.bootstrap}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		select {
		case m := <-pc.Messages():
			if m.Offset != int64(i) {
				t.Fatalf("offset %d at position %d", m.Offset, i)
			}
			if i < 10 && (string(m.Value) != fmt.Sprintf("sync %d", i*3) || len(m.Headers) != 1) {
				t.Fatalf("record %d: %q headers %v", i, m.Value, m.Headers)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("partition consumer: %d of 20 records within 30 s", i)
		}
	}
	pc.Close()
	consumer.Close()

	// A consumer group of two members shares the three partitions and commits all 60 records.
	group := topic + "-g"
	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for m := 0; m < 2; m++ {
		cg, err := sarama.NewConsumerGroup([]string{r.bootstrap}, group, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cg.Close()
			h := &handler{mu: &mu, seen: seen, done: cancel, want: 60}
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
					t.Errorf("consume: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != 60 {
		t.Fatalf("the group consumed %d distinct records, want 60", len(seen))
	}
	offsets, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if b := offsets.GetBlock(topic, p); b == nil || b.Offset != 20 {
			t.Fatalf("committed offset of partition %d: %+v, want 20", p, b)
		}
	}
	// The members left (Close sends LeaveGroup): Kafka keeps the group, Empty with its committed
	// offsets, and lists it with protocol type "consumer".
	groups, err := admin.ListConsumerGroups()
	if err != nil || groups[group] != "consumer" {
		t.Errorf("list groups: %v, %q listed with protocol type %q, want \"consumer\"", err, group, groups[group])
	}
	if err := admin.DeleteConsumerGroup(group); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
}

type handler struct {
	mu   *sync.Mutex
	seen map[string]int
	done context.CancelFunc
	want int
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		s.Commit()
		h.mu.Lock()
		h.seen[string(m.Value)]++
		n := len(h.seen)
		h.mu.Unlock()
		if n >= h.want {
			h.done()
		}
	}
	return nil
}

func ptr(s string) *string { return &s }
