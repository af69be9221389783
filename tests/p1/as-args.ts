// Prints each argument after argv[0], one per line; then, with "env" as the
// first argument, the variables named by the rest.
const argv = process.argv;
if (argv.length > 1 && argv[1] == "env") {
  const env = process.env;
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    process.stdout.write(k + "=" + (env.has(k) ? env.get(k) : "<unset>") + "\n");
  }
} else {
  for (let i = 1; i < argv.length; i++) {
    process.stdout.write(argv[i] + "\n");
  }
}
