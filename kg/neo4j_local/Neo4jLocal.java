// Starts an embedded Neo4j DBMS with Bolt on 127.0.0.1 for tests and laptops without Docker.
// Usage: java Neo4jLocal HOME PORT   (password from NEO4J_LOCAL_PASSWORD; empty disables auth)
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

public final class Neo4jLocal {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Neo4jLocal HOME PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port = Integer.parseInt(args[1]);
        String password = System.getenv().getOrDefault("NEO4J_LOCAL_PASSWORD", "");
        boolean auth = !password.isEmpty();

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
                .setConfig(HttpConnector.enabled, false)
                .setConfig(GraphDatabaseSettings.auth_enabled, auth)
                .setConfig(GraphDatabaseSettings.pagecache_memory, 256L * 1024 * 1024)
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stopped.countDown();
        }));
        if (auth) {
            // The initial password is set on every start so that a changed setting takes effect.
            dbms.database("system").executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                    Map.of("password", password));
        }
        System.out.println("READY bolt://127.0.0.1:" + port);
        System.out.flush();
        stopped.await();
    }
}
