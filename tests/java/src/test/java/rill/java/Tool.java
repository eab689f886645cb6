package rill.java;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs one of Kafka's command-line tools in this JVM, as its bin/kafka-*.sh script would (the same main
 * class and arguments), with stdin given and stdout/stderr captured: Kafka's Exit hooks turn the tool's
 * System.exit into its exit code, and the shutdown hooks it registers are run when it returns. One tool at
 * a time (System.out is global).
 */
public final class Tool {
    /** What a tool run printed and how it exited. */
    public record Result(String command, int code, String out, String err) {
        /** The run as a transcript: the command, its exit code, stdout, and stderr's lines. */
        public String transcript() {
            StringBuilder b = new StringBuilder("$ ").append(command).append("\nexit ").append(code).append('\n')
                    .append(out);
            if (!err.isBlank()) {
                b.append("[stderr]\n").append(err);
            }
            return b.toString();
        }
    }

    private static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    private Tool() {}

    /** Runs `mainClass` with `args` and no stdin. */
    public static Result run(String mainClass, String... args) {
        return runWithInput(mainClass, "", args);
    }

    /** Runs `mainClass` with `args`, `stdin` as its standard input. */
    public static synchronized Result runWithInput(String mainClass, String stdin, String... args) {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        InputStream oldIn = System.in;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<Runnable> hooks = new ArrayList<>();
        Integer[] firstExit = {null};
        int[] outAtExit = {-1};
        int[] errAtExit = {-1};
        int code = 0;
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
            // The first exit ends the run, as it would end the JVM: its code stands, and what the tool
            // prints after it (some tools catch the exit's throwable and print it) is cut off.
            Exit.Procedure exit = (status, message) -> {
                if (firstExit[0] == null) {
                    firstExit[0] = status;
                    outAtExit[0] = out.size();
                    errAtExit[0] = err.size();
                }
                throw new ToolExit(status);
            };
            Exit.setExitProcedure(exit);
            Exit.setHaltProcedure(exit);
            Exit.setShutdownHookAdder((name, hook) -> hooks.add(hook));
            try {
                Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ToolExit toolExit) {
                    code = toolExit.code;
                } else {
                    code = -1;
                    cause.printStackTrace(System.err);
                }
            }
            for (Runnable hook : hooks) {
                try {
                    hook.run();
                } catch (ToolExit ignored) {
                    // a hook that exits: the tool's code stands
                }
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot run " + mainClass, e);
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(oldOut);
            System.setErr(oldErr);
            System.setIn(oldIn);
            Exit.resetExitProcedure();
            Exit.resetHaltProcedure();
            Exit.resetShutdownHookAdder();
        }
        String outText = out.toString(StandardCharsets.UTF_8);
        String errText = err.toString(StandardCharsets.UTF_8);
        if (firstExit[0] != null) {
            code = firstExit[0];
            outText = new String(out.toByteArray(), 0, outAtExit[0], StandardCharsets.UTF_8);
            errText = new String(err.toByteArray(), 0, errAtExit[0], StandardCharsets.UTF_8);
        }
        return new Result(shortName(mainClass) + " " + String.join(" ", args), code, outText, errText);
    }

    private static String shortName(String mainClass) {
        return mainClass.substring(mainClass.lastIndexOf('.') + 1);
    }

    /**
     * Runs `mainClass` in a JVM of its own on this JVM's classpath: for the tools whose end is a real
     * shutdown hook (VerifiableProducer prints its summary from one), which no in-process run can fire.
     */
    public static Result runJvm(String mainClass, String... args) {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path")));
        String log4j = System.getProperty("log4j2.configurationFile");
        if (log4j != null) {
            cmd.add("-Dlog4j2.configurationFile=" + log4j);
        }
        cmd.add(mainClass);
        cmd.addAll(List.of(args));
        try {
            Path err = Files.createTempFile("rill-tool", ".err");
            Process p = new ProcessBuilder(cmd).redirectError(err.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException(mainClass + " did not end within 120 s");
            }
            String errText = Files.readString(err, StandardCharsets.UTF_8);
            Files.delete(err);
            return new Result(shortName(mainClass) + " " + String.join(" ", args), p.exitValue(), out, errText);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
