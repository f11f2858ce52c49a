"""Running the learner's code safely: `learner` (imports a step file; time limits; MAX's errors
worded for the learner), `compat` (the online book's older MAX names), `tensors` (numpy in and
out), `loading` (GPT-2's weights into the learner's modules), `mojo` (step 15's kernel in a child
process), `server` (max serve for step 14)."""
