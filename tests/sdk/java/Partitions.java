import org.apache.kafka.common.utils.Utils;
import java.nio.charset.StandardCharsets;
public class Partitions {
    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        for (int i = 1; i < args.length; i++) {
            byte[] key = args[i].getBytes(StandardCharsets.UTF_8);
            System.out.println(Utils.toPositive(Utils.murmur2(key)) % n);
        }
    }
}
