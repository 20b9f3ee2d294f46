package herdrprompt

// Entries is how many workers the prompter keeps an entry for.
func Entries(p *Prompter) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.workers)
}
