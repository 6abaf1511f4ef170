// Starts an embedded Neo4j DBMS on 127.0.0.1 for tests and laptops without Docker: Bolt, and HTTP
// for Neo4j Browser. Usage: java Neo4jLocal HOME BOLT_PORT HTTP_PORT
// (password from NEO4J_LOCAL_PASSWORD; empty disables auth).
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.QueryExecutionException;

public final class Neo4jLocal {
    // What one transaction may hold in memory: a runaway read fails instead of taking the heap.
    private static final long TRANSACTION_MEMORY_MAX = 512L * 1024 * 1024;
    // What all transactions together may hold: two runaways at once still leave the 1 GB heap room.
    private static final long TRANSACTIONS_MEMORY_TOTAL = 768L * 1024 * 1024;

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Neo4jLocal HOME BOLT_PORT HTTP_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int boltPort = Integer.parseInt(args[1]);
        int httpPort = Integer.parseInt(args[2]);
        String password = System.getenv().getOrDefault("NEO4J_LOCAL_PASSWORD", "");
        boolean auth = !password.isEmpty();

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", boltPort))
                .setConfig(HttpConnector.enabled, true)
                .setConfig(HttpConnector.listen_address, new SocketAddress("127.0.0.1", httpPort))
                .setConfig(GraphDatabaseSettings.auth_enabled, auth)
                .setConfig(GraphDatabaseSettings.pagecache_memory, 256L * 1024 * 1024)
                // LOAD CSV never reads the host's files (file:// URLs); queries read the graph only.
                .setConfig(GraphDatabaseSettings.allow_file_urls, false)
                .setConfig(GraphDatabaseSettings.memory_transaction_max_size, TRANSACTION_MEMORY_MAX)
                .setConfig(GraphDatabaseSettings.memory_transaction_global_max_size, TRANSACTIONS_MEMORY_TOTAL)
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stopped.countDown();
        }));
        if (auth) {
            // The password is set on every start so that a changed setting takes effect.
            try {
                dbms.database("system").executeTransactionally(
                        "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                        Map.of("password", password));
            } catch (QueryExecutionException error) {
                if (!String.valueOf(error.getMessage()).contains("cannot be the same")) {
                    throw error;  // the same password again is fine; anything else is not
                }
            }
        }
        System.out.println("BROWSER http://127.0.0.1:" + httpPort + "/browser/");
        System.out.println("READY bolt://127.0.0.1:" + boltPort);
        System.out.flush();
        stopped.await();
    }
}
