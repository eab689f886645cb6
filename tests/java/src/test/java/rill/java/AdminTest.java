package rill.java;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** Kafka's AdminClient over every admin API Rill implements, on one node. */
class AdminTest extends RillCase {

    private static <T> T cause(Class<T> type, ExecutionException e) {
        return assertInstanceOf(type, e.getCause());
    }

    @Test
    void describeClusterAndFeatures() throws Exception {
        Admin a = sharedAdmin();
        DescribeClusterResult c = a.describeCluster();
        Collection<Node> nodes = c.nodes().get();
        assertEquals(1, nodes.size());
        Node n = nodes.iterator().next();
        assertEquals(1, n.id());
        assertEquals(rill.port, n.port());
        assertEquals(1, c.controller().get().id());
        assertNotNull(c.clusterId().get());
        assertNotNull(a.describeFeatures().featureMetadata().get());
    }

    @Test
    void topicsCreateListDescribeGrowDelete(TestInfo info) throws Exception {
        Admin a = sharedAdmin();
        String topic = unique(info);
        a.createTopics(List.of(new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000"))))
                .all().get();
        ExecutionException again = assertThrows(ExecutionException.class,
                () -> a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get());
        cause(TopicExistsException.class, again);
        assertTrue(a.listTopics().names().get().contains(topic));
        TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        assertEquals(3, d.partitions().size());
        assertEquals(1, d.partitions().get(0).leader().id());
        assertNotNull(d.topicId());
        TopicDescription byId = a.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(
                List.of(d.topicId()))).allTopicIds().get().get(d.topicId());
        assertEquals(topic, byId.name());
        a.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
        assertEquals(5, a.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());
        ExecutionException shrink = assertThrows(ExecutionException.class,
                () -> a.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get());
        cause(InvalidPartitionsException.class, shrink);
        a.deleteTopics(List.of(topic)).all().get();
        waitFor("topic gone", () -> {
            try {
                return !a.listTopics().names().get().contains(topic);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        ExecutionException gone = assertThrows(ExecutionException.class,
                () -> a.deleteTopics(List.of(topic)).all().get());
        cause(UnknownTopicOrPartitionException.class, gone);
    }

    @Test
    void topicAndBrokerConfigsIncremental(TestInfo info) throws Exception {
        Admin a = sharedAdmin();
        String topic = unique(info);
        a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        a.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SET))))
                .all().get();
        Config cfg = a.describeConfigs(List.of(res)).all().get().get(res);
        assertEquals("7200000", cfg.get("retention.ms").value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, cfg.get("retention.ms").source());
        assertEquals("compact", cfg.get("cleanup.policy").value());
        a.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND),
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
        cfg = a.describeConfigs(List.of(res)).all().get().get(res);
        assertEquals(Set.of("compact", "delete"), Set.of(cfg.get("cleanup.policy").value().split(",")));
        assertFalse(cfg.get("retention.ms").source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);

        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        a.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("log.retention.ms", "86400000"), AlterConfigOp.OpType.SET))))
                .all().get();
        Config b = a.describeConfigs(List.of(broker)).all().get().get(broker);
        assertEquals("86400000", b.get("log.retention.ms").value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG, b.get("log.retention.ms").source());
        assertEquals("1", b.get("broker.id").value());
        a.incrementalAlterConfigs(Map.of(broker, List.of(
                new AlterConfigOp(new ConfigEntry("log.retention.ms", ""), AlterConfigOp.OpType.DELETE))))
                .all().get();
        b = a.describeConfigs(List.of(broker)).all().get().get(broker);
        assertFalse(b.get("log.retention.ms").source() == ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG);
    }

    @Test
    void listOffsetsAndDeleteRecords(TestInfo info) throws Exception {
        Admin a = sharedAdmin();
        String topic = unique(info);
        TopicPartition tp = new TopicPartition(topic, 0);
        a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        try (KafkaProducer<String, String> p = producer(Map.of("linger.ms", "0"))) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 0, 1_700_000_000_000L + i * 1000L, null, "v" + i)).get();
            }
        }
        assertEquals(0L, offset(a, tp, OffsetSpec.earliest()));
        assertEquals(10L, offset(a, tp, OffsetSpec.latest()));
        assertEquals(4L, offset(a, tp, OffsetSpec.forTimestamp(1_700_000_000_000L + 3500L)));
        assertEquals(9L, offset(a, tp, OffsetSpec.maxTimestamp()));
        var deleted = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(6))).lowWatermarks().get(tp).get();
        assertEquals(6L, deleted.lowWatermark());
        assertEquals(6L, offset(a, tp, OffsetSpec.earliest()));
        assertEquals(6L, offset(a, tp, OffsetSpec.earliestLocal()));
    }

    private static long offset(Admin a, TopicPartition tp, OffsetSpec spec) throws Exception {
        ListOffsetsResult.ListOffsetsResultInfo r = a.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        return r.offset();
    }

    @Test
    void consumerGroupsListDescribeOffsetsRemoveDelete(TestInfo info) throws Exception {
        Admin a = sharedAdmin();
        String topic = unique(info);
        String group = topic + "-g";
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);
        a.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            produce(p, topic, 2, 20);
        }
        try (KafkaConsumer<String, String> c = consumer(Map.of("group.id", group, "group.protocol", "classic",
                "group.instance.id", "admin-static"))) {
            c.subscribe(List.of(topic));
            pollUntil(c, 20);
            c.commitSync(TIMEOUT);
            Collection<GroupListing> groups = a.listGroups(ListGroupsOptions.forConsumerGroups()).all().get();
            GroupListing listing = groups.stream().filter(g -> g.groupId().equals(group)).findFirst().orElseThrow();
            assertEquals(Optional.of(GroupState.STABLE), listing.groupState());
            var d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
            assertEquals(GroupState.STABLE, d.groupState());
            assertEquals(1, d.members().size());
            assertEquals(Set.of(tp0, tp1), d.members().iterator().next().assignment().topicPartitions());
            assertEquals("range", d.partitionAssignor(), "the first assignor both sides know");
        }
        // The static member stays after close; the admin client removes it.
        a.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(
                List.of(new MemberToRemove("admin-static")))).all().get();
        waitFor("group empty", () -> {
            try {
                return a.describeConsumerGroups(List.of(group)).all().get().get(group).groupState() == GroupState.EMPTY;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        Map<TopicPartition, OffsetAndMetadata> offsets = a.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get();
        assertEquals(10L, offsets.get(tp0).offset());
        assertEquals(10L, offsets.get(tp1).offset());
        a.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(3))).all().get();
        assertEquals(3L, a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(tp0).offset());
        a.deleteConsumerGroupOffsets(group, Set.of(tp1)).all().get();
        assertFalse(a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().containsKey(tp1));
        a.deleteConsumerGroups(List.of(group)).all().get();
        Set<String> left = a.listGroups().all().get().stream().map(GroupListing::groupId).collect(Collectors.toSet());
        assertFalse(left.contains(group));
    }

    @Test
    void transactionsListDescribeProducersAbortAndFence(TestInfo info) throws Exception {
        Admin a = sharedAdmin();
        String topic = unique(info);
        String txnId = topic + "-txn";
        TopicPartition tp = new TopicPartition(topic, 0);
        a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        try (KafkaProducer<String, String> p = producer(Map.of("transactional.id", txnId))) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, "k", "open")).get();
            Collection<TransactionListing> listed = a.listTransactions().all().get();
            TransactionListing l = listed.stream().filter(t -> t.transactionalId().equals(txnId)).findFirst()
                    .orElseThrow(() -> new AssertionError("not listed: " + listed));
            assertEquals(TransactionState.ONGOING, l.state());
            TransactionDescription d = a.describeTransactions(List.of(txnId)).all().get().get(txnId);
            assertEquals(TransactionState.ONGOING, d.state());
            assertEquals(Set.of(tp), d.topicPartitions());
            assertEquals(1, d.coordinatorId());
            List<ProducerState> producers = a.describeProducers(List.of(tp)).partitionResult(tp).get()
                    .activeProducers();
            assertEquals(1, producers.size());
            ProducerState ps = producers.get(0);
            assertEquals(d.producerId(), ps.producerId());
            assertEquals(java.util.OptionalLong.of(0), ps.currentTransactionStartOffset());
            // An operator's abort of the hanging transaction: a marker written on the partition.
            a.abortTransaction(new AbortTransactionSpec(tp, ps.producerId(), (short) ps.producerEpoch(),
                    ps.coordinatorEpoch().orElse(-1))).all().get();
            waitFor("no active producer transaction", () -> {
                try {
                    return a.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers().stream()
                            .allMatch(s -> s.currentTransactionStartOffset().isEmpty());
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            // Fencing bumps the epoch: the old producer can no longer commit.
            a.fenceProducers(List.of(txnId)).all().get();
            assertThrows(Exception.class, p::commitTransaction);
        }
        assertEquals(0, readAll(List.of(tp), Map.of("isolation.level", "read_committed")).size());
    }

    @Test
    void reassignmentsElectionsAndLogDirs(TestInfo info) throws Exception {
        Admin a = sharedAdmin();
        String topic = unique(info);
        TopicPartition tp = new TopicPartition(topic, 0);
        a.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            produce(p, topic, 2, 10);
        }
        assertTrue(a.listPartitionReassignments().reassignments().get().isEmpty());
        // Onto the replica it already has: accepted, and nothing stays in progress.
        a.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(1))))).all().get();
        waitFor("reassignment done", () -> {
            try {
                return a.listPartitionReassignments(Set.of(tp)).reassignments().get().isEmpty();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        var elected = a.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get();
        assertInstanceOf(ElectionNotNeededException.class, elected.get(tp).orElseThrow());
        Map<String, LogDirDescription> dirs = a.describeLogDirs(List.of(1)).allDescriptions().get().get(1);
        assertEquals(1, dirs.size());
        LogDirDescription dir = dirs.values().iterator().next();
        assertTrue(dir.error() == null, String.valueOf(dir.error()));
        assertTrue(dir.replicaInfos().get(tp).size() > 0, "partition 0 holds bytes");
        var replica = a.describeReplicaLogDirs(List.of(new org.apache.kafka.common.TopicPartitionReplica(topic, 0, 1)))
                .all().get().values().iterator().next();
        String path = dirs.keySet().iterator().next();
        assertEquals(path, replica.getCurrentReplicaLogDir());
        // Into the directory it is in (a single log dir): accepted.
        a.alterReplicaLogDirs(Map.of(new org.apache.kafka.common.TopicPartitionReplica(topic, 0, 1), path)).all().get();
    }
}
